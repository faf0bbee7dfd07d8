package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/service"
)

func teamCreateCmd() *cobra.Command {
	var state stateFlags
	var q quotaFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a team (then give it a key: cove key create --team NAME)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := state.open(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			t, err := service.CreateTeam(cmd.Context(), st, args[0], q.quota(cmd))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created team %s (id %s); give it a key: cove key create --team %s --name NAME\n", t.Name, t.ID, t.Name)
			return nil
		},
	}
	state.add(cmd)
	q.add(cmd)
	return cmd
}
