package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func volumeCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME",
		Short: "Create a volume and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			v, err := c.CreateVolume(cmd.Context(), args[0])
			if err != nil {
				return explain(c, err, "")
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.ID)
			return nil
		},
	}
}
