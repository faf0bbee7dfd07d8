package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func templateListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List templates",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			list, err := c.ListTemplates(cmd.Context())
			if err != nil {
				return explain(c, err, "")
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAMES\tSTATUS\tCPU\tMEMORY\tBUILDS\tUPDATED")
			var doing []string
			for _, t := range list {
				updated := ""
				if !t.UpdatedAt.IsZero() {
					updated = t.UpdatedAt.Local().Format(time.DateTime)
				}
				status := t.Status()
				if t.BuildProgress != nil {
					status = fmt.Sprintf("%s %d%%", status, *t.BuildProgress)
					doing = append(doing, fmt.Sprintf("%s is %d%% done, now %s", strings.Join(t.Names, ","), *t.BuildProgress, t.BuildDoing))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d MiB\t%d\t%s\n", t.TemplateID, strings.Join(t.Names, ","), status,
					t.CPUCount, t.MemoryMB, t.BuildCount, updated)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, d := range doing { // what each build in progress does now
				fmt.Fprintln(cmd.OutOrStdout(), d)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
