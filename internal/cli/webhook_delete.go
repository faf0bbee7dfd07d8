package cli

import (
	"github.com/spf13/cobra"
)

func webhookDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a webhook; what it had still to deliver is dropped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if err := c.DeleteWebhook(cmd.Context(), args[0]); err != nil {
				return explain(c, err, args[0])
			}
			return nil
		},
	}
}
