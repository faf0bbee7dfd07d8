package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// eventsPoll is how often `sandbox events -f` asks for new events.
const eventsPoll = time.Second

func sandboxEventsCmd() *cobra.Command {
	var (
		follow bool
		types  []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "events SANDBOX",
		Short: "Show a sandbox's lifecycle events, oldest first (what its team's webhooks receive)",
		Long: "Show a sandbox's lifecycle events, oldest first: created, updated, paused,\n" +
			"resumed, checkpointed, killed, each with why (kept 7 days). With -f, wait for\n" +
			"new ones until the sandbox is killed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			opts := cove.EventOptions{SandboxID: args[0], Types: types, Ascending: true}
			for gone := false; ; {
				events, err := c.Events(cmd.Context(), opts)
				if err != nil {
					return explain(c, err, args[0])
				}
				for _, e := range events {
					if err := printEvent(cmd.OutOrStdout(), e, asJSON); err != nil {
						return err
					}
					gone = gone || e.Type == killedEvent
				}
				opts.Offset += len(events)
				if !follow || gone {
					return nil
				}
				if len(events) == 0 {
					// Caught up: once the sandbox is gone, one look more for
					// what it ended with, then stop.
					_, err := c.Info(cmd.Context(), args[0])
					gone = errors.Is(err, cove.ErrNotFound)
				}
				if !gone {
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(eventsPoll):
					}
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "wait for new events until the sandbox is killed")
	cmd.Flags().StringSliceVar(&types, "type", nil, "only events of these types (sandbox.lifecycle.created, …; repeat or comma-separate)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON object, as webhooks receive it")
	return cmd
}

// killedEvent is a sandbox's last event.
const killedEvent = "sandbox.lifecycle.killed"

func printEvent(w io.Writer, e cove.Event, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(e)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-9s", e.Timestamp.Local().Format("2006-01-02 15:04:05.000"), strings.TrimPrefix(e.Type, "sandbox.lifecycle."))
	if e.Data.Reason != "" {
		b.WriteString(" reason=" + e.Data.Reason)
	}
	b.WriteString(" template=" + e.TemplateID)
	for _, k := range slices.Sorted(maps.Keys(e.Data.Metadata)) {
		b.WriteString(" " + k + "=" + e.Data.Metadata[k])
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}
