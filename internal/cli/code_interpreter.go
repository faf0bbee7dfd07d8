package cli

import (
	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/envd/codeinterp"
)

// codeInterpreterCmd runs the code interpreter of port 49999, as the
// code-interpreter-v1 template's start command does inside a sandbox.
func codeInterpreterCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "code-interpreter",
		Short:              "Run the code interpreter (port 49999) inside a sandbox",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := codeinterp.Main(args); code != 0 {
				return exitCodeError{code: code}
			}
			return nil
		},
	}
}
