package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func webhookDeliveriesCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "deliveries ID",
		Short: "List what a webhook has still to take: events not sent yet, and those whose attempts failed, with why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			list, err := c.WebhookDeliveries(cmd.Context(), args[0])
			if err != nil {
				return explain(c, err, args[0])
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "DELIVERY\tEVENT\tSANDBOX\tATTEMPTS\tNEXT\tLAST ERROR")
			for _, d := range list {
				next := "now"
				if wait := time.Until(d.NextAttemptAt); wait > 0 {
					next = "in " + wait.Round(time.Second).String()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, strings.TrimPrefix(d.EventType, "sandbox.lifecycle."), d.SandboxID, d.Attempts, next, d.LastError)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
