package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func sandboxForkCmd() *cobra.Command {
	var (
		count   int
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "fork SANDBOX",
		Short: "Start sandboxes from a copy of a sandbox — its files, on gVisor and in microVMs of image templates its processes too (the sandbox goes on); prints their ids",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			kids, err := c.Fork(cmd.Context(), args[0], count, timeout)
			for _, k := range kids {
				if k != nil {
					fmt.Fprintln(cmd.OutOrStdout(), k.ID)
				}
			}
			if err != nil {
				return explain(c, err, args[0])
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&count, "count", "n", 1, "how many sandboxes (at most 100)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long each lives")
	return cmd
}
