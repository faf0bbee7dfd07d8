package cli

import (
	"github.com/spf13/cobra"
)

// snapshotCmd groups the snapshot verbs (snapshots are made with `cove
// sandbox snapshot`).
func snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "List and delete snapshots (make them with `cove sandbox snapshot`)",
	}
	cmd.AddCommand(snapshotListCmd(), snapshotDeleteCmd())
	return cmd
}
