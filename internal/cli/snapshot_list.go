package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func snapshotListCmd() *cobra.Command {
	var (
		f      cove.SnapshotFilter
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List snapshots, newest first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			list, err := c.ListSnapshots(cmd.Context(), f)
			if err != nil {
				return explain(c, err, "")
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SNAPSHOT\tNAMES")
			for _, s := range list {
				fmt.Fprintf(w, "%s\t%s\n", s.ID, strings.Join(s.Names, ","))
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&f.SandboxID, "sandbox", "", "only snapshots of this sandbox")
	cmd.Flags().StringVar(&f.Name, "name", "", "only snapshots of this name")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
