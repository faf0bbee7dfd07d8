package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxListCmd() *cobra.Command {
	var (
		meta   []string
		states []string
		tpl    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List sandboxes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			m, err := keyValues(meta, "metadata")
			if err != nil {
				return err
			}
			list, err := c.List(cmd.Context(), cove.ListOptions{Metadata: m, States: states, Template: tpl})
			if err != nil {
				return explain(c, err, "")
			}
			if asJSON {
				if list == nil {
					list = []cove.SandboxInfo{} // [] for none, not null
				}
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTEMPLATE\tISOLATION\tSTATE\tSTARTED\tENDS IN\tMETADATA")
			for _, s := range list {
				name := s.Name
				if name == "" {
					name = s.TemplateID
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, name, s.Isolation, s.State, s.StartedAt.Local().Format(time.DateTime),
					time.Until(s.EndAt).Round(time.Second), formatMeta(s.Metadata))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringArrayVarP(&meta, "metadata", "m", nil, "only sandboxes with this metadata key=value (repeatable)")
	cmd.Flags().StringArrayVar(&states, "state", nil, "only sandboxes in this state: running or paused (repeatable)")
	cmd.Flags().StringVarP(&tpl, "template", "t", "", "only sandboxes of this template (id or name)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func formatMeta(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
