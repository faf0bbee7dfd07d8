package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/errs"
)

func teamSetCmd() *cobra.Command {
	var state stateFlags
	var q quotaFlags
	cmd := &cobra.Command{
		Use:   "set TEAM",
		Short: "Set a team's quotas (a running server applies them to its next create and build)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			quota := q.quota(cmd)
			if quota.MaxSandboxes == nil && quota.MaxStorageMB == nil {
				return errs.New(errs.InvalidArgument, "give --max-sandboxes or --max-storage-mb")
			}
			if q.sandboxes < 0 || q.storageMB < 0 {
				return errs.New(errs.InvalidArgument, "a team's quotas are 0 (the server's) or more")
			}
			ctx := cmd.Context()
			st, t, err := state.openTeam(ctx, cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.SetTeamQuota(ctx, t.ID, quota); err != nil {
				return err
			}
			t, err = st.Team(ctx, t.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "team %s: max sandboxes %s, max storage MiB %s\n", t.Name, orServer(int64(t.MaxSandboxes)), orServer(t.MaxStorageMB))
			return nil
		},
	}
	state.add(cmd)
	q.add(cmd)
	return cmd
}
