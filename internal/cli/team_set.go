package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

func teamSetCmd() *cobra.Command {
	var state stateFlags
	var q quotaFlags
	cmd := &cobra.Command{
		Use:   "set TEAM",
		Short: "Set a team's quotas (a running server applies them within 5 seconds)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			quota := q.quota(cmd)
			if quota == (store.TeamQuota{}) {
				return errs.New(errs.InvalidArgument, "give one of --max-sandboxes, --max-cpus, --max-memory-mb, --max-disk-mb, --max-storage-mb")
			}
			if err := service.CheckQuota(quota); err != nil {
				return err
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
			fmt.Fprintf(cmd.OutOrStdout(), "team %s: %s\n", t.Name, quotaText(t.Quota))
			return nil
		},
	}
	state.add(cmd)
	q.add(cmd)
	return cmd
}
