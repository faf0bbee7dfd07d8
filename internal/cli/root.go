// Package cli is the cove command line: one file per verb.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/version"
)

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "cove",
		Short:         "Cove runs untrusted code in sandboxes that start in milliseconds",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetVersionTemplate("cove {{.Version}}\n")
	root.AddCommand(versionCmd(), envdCmd(), codeInterpreterCmd(), serverCmd(), apiCmd(), nodeCmd(), keyCmd(), teamCmd(), sandboxCmd(), snapshotCmd(), templateCmd(), volumeCmd(), webhookCmd())
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var exit exitCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	default:
		fmt.Fprintln(os.Stderr, "cove:", err)
		return 1
	}
}
