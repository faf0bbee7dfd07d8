package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func templateDeleteCmd() *cobra.Command {
	return deleteCmd("delete NAME|ID...", "Delete templates (sandboxes running from them go on)",
		func(ctx context.Context, c *cove.Client, ref string) error { return c.DeleteTemplate(ctx, ref) })
}

// deleteCmd is a verb that deletes each of its arguments with del and
// says so.
func deleteCmd(use, short string, del func(ctx context.Context, c *cove.Client, ref string) error) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Aliases: []string{"rm"},
		Short:   short,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, ref := range args {
				if err := del(cmd.Context(), c, ref); err != nil {
					return explain(c, err, "")
				}
				fmt.Fprintln(cmd.OutOrStdout(), "deleted", ref)
			}
			return nil
		},
	}
}
