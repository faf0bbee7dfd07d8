package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxPauseCmd() *cobra.Command {
	var noMemory bool
	cmd := &cobra.Command{
		Use:   "pause SANDBOX",
		Short: "Pause a sandbox with its memory: its processes stop where they are until it is resumed",
		Long: `Pause a sandbox with its memory: its processes stop where they are until it is
resumed. With --no-memory its files are kept and nothing else: its processes end,
it holds no memory, and resume boots it again over its files.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			pause := c.Pause
			if noMemory {
				pause = c.PauseWithoutMemory
			}
			if err := pause(cmd.Context(), args[0]); err != nil {
				if errors.Is(err, cove.ErrConflict) {
					return fmt.Errorf("sandbox %s is paused already", args[0])
				}
				return explain(c, err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "paused %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&noMemory, "no-memory", false, "keep its files only: its processes end, resume boots it again")
	return cmd
}
