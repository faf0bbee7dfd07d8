package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/server"
)

func teamDeleteCmd() *cobra.Command {
	var state stateFlags
	cmd := &cobra.Command{
		Use:   "delete TEAM",
		Short: "Delete a team and revoke its keys (refused while it has sandboxes, templates or volumes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, t, err := state.openTeam(cmd.Context(), cmd.ErrOrStderr(), args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if err := server.DeleteTeam(cmd.Context(), st, state.dataDir, t); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted team %s (id %s) and its keys\n", t.Name, t.ID)
			return nil
		},
	}
	state.add(cmd)
	return cmd
}
