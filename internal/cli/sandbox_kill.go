package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

func sandboxKillCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kill SANDBOX...",
		Short: "Kill sandboxes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				if err := c.Kill(cmd.Context(), id); err != nil {
					errs = append(errs, explain(c, err, id))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "killed %s\n", id)
			}
			return errors.Join(errs...)
		},
	}
}
