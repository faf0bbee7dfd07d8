package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func sandboxSnapshotCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "snapshot SANDBOX",
		Short: "Save a sandbox's files (on gVisor and in microVMs of image templates its processes too) as a snapshot new sandboxes start from (the sandbox goes on)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			snap, err := c.CreateSnapshot(cmd.Context(), args[0], name)
			if err != nil {
				return explain(c, err, args[0])
			}
			fmt.Fprintln(cmd.OutOrStdout(), snap.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the snapshot's name (an existing one gets a new version)")
	return cmd
}
