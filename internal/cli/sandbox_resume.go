package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxResumeCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "resume SANDBOX",
		Short: "Resume a paused sandbox where it stopped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if _, err := c.Resume(cmd.Context(), args[0], timeout); err != nil {
				if errors.Is(err, cove.ErrConflict) {
					return fmt.Errorf("sandbox %s is running, not paused", args[0])
				}
				return explain(c, err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resumed %s\n", args[0])
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long it runs from now")
	return cmd
}
