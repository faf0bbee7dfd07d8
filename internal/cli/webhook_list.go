package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func webhookListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the team's webhooks (never their secrets)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			list, err := c.ListWebhooks(cmd.Context())
			if err != nil {
				return explain(c, err, "")
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tURL\tENABLED\tEVENTS")
			for _, h := range list {
				events := make([]string, len(h.Events))
				for i, e := range h.Events {
					events[i] = strings.TrimPrefix(e, "sandbox.lifecycle.")
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%s\n", h.ID, h.Name, h.URL, h.Enabled, strings.Join(events, ","))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
