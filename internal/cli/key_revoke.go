package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/server"
)

func keyRevokeCmd() *cobra.Command {
	var state stateFlags
	var team string
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a team's API key (its id from cove key list): requests with it fail at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, t, err := state.openTeam(cmd.Context(), cmd.ErrOrStderr(), team)
			if err != nil {
				return err
			}
			defer st.Close()
			k, err := service.RevokeKey(cmd.Context(), st, t.ID, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s) of team %s\n", k.ID(), k.Name, t.Name)
			return nil
		},
	}
	state.add(cmd)
	cmd.Flags().StringVar(&team, "team", server.DefaultTeam, "the key's team (name or id)")
	return cmd
}
