package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

func keyListCmd() *cobra.Command {
	var state stateFlags
	var team string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List API keys (masked), of one team or of all",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := state.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			var teams []store.Team
			if team != "" {
				t, err := st.Team(ctx, team)
				if err != nil {
					return err
				}
				teams = []store.Team{t}
			} else if teams, err = st.Teams(ctx); err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTEAM\tNAME\tKEY\tCREATED\tLAST USED")
			for _, t := range teams {
				keys, err := st.TeamAPIKeys(ctx, t.ID)
				if err != nil {
					return err
				}
				for _, k := range keys {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID(), t.Name, k.Name, k.Masked(), k.CreatedAt.Format(time.RFC3339), orNever(k.LastUsed))
				}
			}
			return w.Flush()
		},
	}
	state.add(cmd)
	cmd.Flags().StringVar(&team, "team", "", "only this team's keys (name or id)")
	return cmd
}

func orNever(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.RFC3339)
}
