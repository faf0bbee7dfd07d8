package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/server"
)

func keyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "key", Short: "Manage the API keys of this host's server"}
	cmd.AddCommand(keyCreateCmd())
	return cmd
}

func keyCreateCmd() *cobra.Command {
	var dataDir, database, name, listen string
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API key in the server's data directory (a running server accepts it at once) and print it",
		Long: `Create an API key in the server's data directory and print it once, with the
variables the E2B SDKs and the CLI read. Keys are stored hashed: this is how
to get one back when the printed key is lost. Run it as the user that runs
cove server (root).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := server.CreateAPIKey(cmd.Context(), database, dataDir, name)
			if err != nil {
				return err
			}
			server.PrintKey(cmd.OutOrStdout(), key, listen)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", envOr("COVE_DATA_DIR", defaultDataDir()), "the server's data directory (COVE_DATA_DIR)")
	f.StringVar(&database, "database", os.Getenv("COVE_DATABASE"), "the server's PostgreSQL database, when it keeps its state there (COVE_DATABASE)")
	f.StringVar(&name, "name", "cli", "a name for the key")
	f.StringVar(&listen, "listen", envOr("COVE_LISTEN", "127.0.0.1:3000"), "the server's listen address, for the printed URLs (COVE_LISTEN)")
	return cmd
}
