package cli

import (
	"errors"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func webhookUpdateCmd() *cobra.Command {
	var (
		f               webhookFlags
		enable, disable bool
	)
	cmd := &cobra.Command{
		Use:   "update ID [--name NAME] [--url URL] [--event TYPE]... [--secret SECRET] [--enable|--disable]",
		Short: "Change what the flags given say of a webhook",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ch := f.change(cmd)
			switch {
			case enable && disable:
				return errors.New("--enable or --disable, not both")
			case enable || disable:
				ch.Enabled = &enable
			}
			if ch == (cove.WebhookChange{}) {
				return errors.New("nothing to change: give --name, --url, --event, --secret, --enable or --disable")
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			if _, err := c.UpdateWebhook(cmd.Context(), args[0], ch); err != nil {
				return explain(c, err, args[0])
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&enable, "enable", false, "send events to it")
	cmd.Flags().BoolVar(&disable, "disable", false, "send it nothing until enabled")
	return cmd
}
