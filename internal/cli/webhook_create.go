package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func webhookCreateCmd() *cobra.Command {
	var (
		f        webhookFlags
		disabled bool
	)
	cmd := &cobra.Command{
		Use:   "create --url URL [--name NAME] [--secret SECRET] [--event TYPE]... [--disabled]",
		Short: "Create a webhook and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ch := f.change(cmd)
			if disabled {
				enabled := false
				ch.Enabled = &enabled
			}
			w, err := c.CreateWebhook(cmd.Context(), ch)
			if err != nil {
				return explain(c, err, "")
			}
			fmt.Fprintln(cmd.OutOrStdout(), w.ID)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&disabled, "disabled", false, "create it disabled (update --enable sends to it)")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}
