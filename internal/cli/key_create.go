package cli

import (
	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/server"
)

func keyCreateCmd() *cobra.Command {
	var state stateFlags
	var team, name, listen string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API key of a team and print it (a running server accepts it at once)",
		Long: `Create an API key of a team (by name or id; default: the team the server
starts with) and print it once, with the variables the E2B SDKs and the
CLI read. Keys are stored hashed: this is how to get one back when the
printed key is lost. Run it as the user that runs cove server (root).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := state.open(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			key, _, err := service.CreateKey(cmd.Context(), st, team, name)
			if err != nil {
				return err
			}
			server.PrintKey(cmd.OutOrStdout(), key, listen, "team "+team)
			return nil
		},
	}
	state.add(cmd)
	f := cmd.Flags()
	f.StringVar(&team, "team", server.DefaultTeam, "the key's team (name or id)")
	f.StringVar(&name, "name", "cli", "a name for the key")
	f.StringVar(&listen, "listen", envOr("COVE_LISTEN", "127.0.0.1:3000"), "the server's listen address, for the printed URLs (COVE_LISTEN)")
	return cmd
}
