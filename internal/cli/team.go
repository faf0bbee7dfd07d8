package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

func teamCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "team", Short: "Manage teams, in the server's data directory or database: each has its own sandboxes, templates, volumes and keys"}
	cmd.AddCommand(teamCreateCmd(), teamListCmd(), teamSetCmd(), teamDeleteCmd())
	return cmd
}

// quotaFlags are a team's quotas as flags; only those given change.
type quotaFlags struct{ q store.Quota }

func (q *quotaFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&q.q.MaxSandboxes, "max-sandboxes", 0, "sandboxes the team may run at once (0: the server's --team-max-sandboxes)")
	f.IntVar(&q.q.MaxCPUs, "max-cpus", 0, "CPUs the team's sandboxes may hold together (0: the server's --team-max-cpus)")
	f.Int64Var(&q.q.MaxMemoryMB, "max-memory-mb", 0, "memory (MiB) the team's sandboxes may hold together (0: the server's --team-max-memory-mb)")
	f.Int64Var(&q.q.MaxDiskMB, "max-disk-mb", 0, "disk (MiB) the team's sandboxes may hold together (0: the server's --team-max-disk-mb)")
	f.Int64Var(&q.q.MaxStorageMB, "max-storage-mb", 0, "template layers (MiB) the team's templates may hold (0: the server's --team-max-storage-mb)")
}

// quota is what the flags given set.
func (q *quotaFlags) quota(cmd *cobra.Command) store.TeamQuota {
	var out store.TeamQuota
	changed := cmd.Flags().Changed
	if changed("max-sandboxes") {
		out.MaxSandboxes = &q.q.MaxSandboxes
	}
	if changed("max-cpus") {
		out.MaxCPUs = &q.q.MaxCPUs
	}
	if changed("max-memory-mb") {
		out.MaxMemoryMB = &q.q.MaxMemoryMB
	}
	if changed("max-disk-mb") {
		out.MaxDiskMB = &q.q.MaxDiskMB
	}
	if changed("max-storage-mb") {
		out.MaxStorageMB = &q.q.MaxStorageMB
	}
	return out
}

// quotaText shows a team's quota; 0 is the server's.
func quotaText(q store.Quota) string {
	return fmt.Sprintf("max sandboxes %s, CPUs %s, memory MiB %s, disk MiB %s, storage MiB %s", orServer(int64(q.MaxSandboxes)),
		orServer(int64(q.MaxCPUs)), orServer(q.MaxMemoryMB), orServer(q.MaxDiskMB), orServer(q.MaxStorageMB))
}
