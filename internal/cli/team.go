package cli

import (
	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

func teamCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "team", Short: "Manage teams, in the server's data directory or database: each has its own sandboxes, templates, volumes and keys"}
	cmd.AddCommand(teamCreateCmd(), teamListCmd(), teamSetCmd(), teamDeleteCmd())
	return cmd
}

// quotaFlags are a team's quotas as flags; only those given change.
type quotaFlags struct {
	sandboxes int
	storageMB int64
}

func (q *quotaFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&q.sandboxes, "max-sandboxes", 0, "sandboxes the team may run at once (0: the server's --team-max-sandboxes)")
	f.Int64Var(&q.storageMB, "max-storage-mb", 0, "template layers (MiB) the team's templates may hold (0: the server's --team-max-storage-mb)")
}

func (q *quotaFlags) quota(cmd *cobra.Command) store.TeamQuota {
	var out store.TeamQuota
	if cmd.Flags().Changed("max-sandboxes") {
		out.MaxSandboxes = &q.sandboxes
	}
	if cmd.Flags().Changed("max-storage-mb") {
		out.MaxStorageMB = &q.storageMB
	}
	return out
}
