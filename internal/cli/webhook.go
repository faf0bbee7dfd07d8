package cli

import (
	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// webhookCmd groups the webhook verbs: the team's lifecycle events sent
// to a URL as they happen (`cove sandbox events` shows them as kept).
func webhookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhook",
		Aliases: []string{"webhooks"},
		Short:   "Create, list, update and delete webhooks (the team's sandbox lifecycle events sent to a URL) and see what each has still to take",
	}
	cmd.AddCommand(webhookCreateCmd(), webhookListCmd(), webhookUpdateCmd(), webhookDeleteCmd(), webhookDeliveriesCmd())
	return cmd
}

// webhookFlags are the fields create sets and update changes.
type webhookFlags struct {
	name, url, secret string
	events            []string
}

func (f *webhookFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "the webhook's name")
	fl.StringVar(&f.url, "url", "", "where events are POSTed (http or https)")
	fl.StringSliceVar(&f.events, "event", nil, "the event types it receives (sandbox.lifecycle.created, …; repeat or comma-separate; default: all)")
	fl.StringVar(&f.secret, "secret", "", "the secret each delivery's e2b-signature header is made with (docs/GUIDE.md)")
}

// change is what the flags the user gave set.
func (f *webhookFlags) change(cmd *cobra.Command) cove.WebhookChange {
	var c cove.WebhookChange
	fl := cmd.Flags()
	if fl.Changed("name") {
		c.Name = &f.name
	}
	if fl.Changed("url") {
		c.URL = &f.url
	}
	if fl.Changed("event") {
		c.Events = &f.events
	}
	if fl.Changed("secret") {
		c.Secret = &f.secret
	}
	return c
}
