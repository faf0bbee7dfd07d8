package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/envd"
)

// envdCmd runs the in-sandbox agent by hand (drivers start it themselves).
func envdCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "envd",
		Short: "Run the in-sandbox agent (E2B envd protocol) on this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			return envd.Run(cmd.Context(), envd.RunConfig{Addr: addr}, log)
		},
	}
	cmd.Flags().StringVar(&addr, "listen", ":49983", "address to listen on")
	return cmd
}
