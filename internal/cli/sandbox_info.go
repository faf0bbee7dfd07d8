package cli

import (
	"github.com/spf13/cobra"
)

func sandboxInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info SANDBOX",
		Short: "Show a sandbox's details as JSON (in a cluster, with the node it runs on)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			info, err := c.Info(cmd.Context(), args[0])
			if err != nil {
				return explain(c, err, args[0])
			}
			return printJSON(cmd.OutOrStdout(), info)
		},
	}
}
