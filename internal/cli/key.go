package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/server"
)

func keyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Manage teams' API keys, in the server's data directory or database"}
	cmd.AddCommand(keyCreateCmd(), keyListCmd(), keyRevokeCmd())
	return cmd
}

// stateFlags name the state `cove key` and `cove team` work on: the
// server's, by the same defaults and variables as cove server's.
type stateFlags struct{ dataDir, database string }

func (f *stateFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", envOr("COVE_DATA_DIR", defaultDataDir()), "the server's data directory (COVE_DATA_DIR)")
	fl.StringVar(&f.database, "database", os.Getenv("COVE_DATABASE"), "the server's (or a cluster's) PostgreSQL database, when the state is kept there (COVE_DATABASE)")
}

// open opens the state and says which on errw (the command's output stays
// its answer alone).
func (f *stateFlags) open(ctx context.Context, errw io.Writer) (store.Store, error) {
	where := "the data directory " + f.dataDir
	if f.database != "" {
		where = "the database of --database"
	}
	fmt.Fprintf(errw, "using %s\n", where)
	return server.OpenStore(ctx, f.database, f.dataDir)
}

// openTeam opens the state and finds a team in it (by name or id).
func (f *stateFlags) openTeam(ctx context.Context, errw io.Writer, ref string) (store.Store, store.Team, error) {
	st, err := f.open(ctx, errw)
	if err != nil {
		return nil, store.Team{}, err
	}
	t, err := st.Team(ctx, ref)
	if err != nil {
		st.Close()
		return nil, store.Team{}, err
	}
	return st, t, nil
}
