package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func templateDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME|ID...",
		Aliases: []string{"rm"},
		Short:   "Delete templates (sandboxes running from them go on)",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, ref := range args {
				if err := c.DeleteTemplate(cmd.Context(), ref); err != nil {
					return explain(c, err, "")
				}
				fmt.Fprintln(cmd.OutOrStdout(), "deleted", ref)
			}
			return nil
		},
	}
}
