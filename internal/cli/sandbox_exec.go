package cli

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// exitCodeError makes the process exit with a command's code.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return "" }

func sandboxExecCmd() *cobra.Command {
	var (
		user, cwd string
		envs      []string
	)
	cmd := &cobra.Command{
		Use:   "exec SANDBOX -- COMMAND [ARG...]",
		Short: "Run a command in a sandbox, streaming its output; exits with its exit code",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			e, err := keyValues(envs, "env")
			if err != nil {
				return err
			}
			sbx, err := c.Connect(cmd.Context(), args[0], 0)
			if err != nil {
				return explain(c, err, args[0])
			}
			opts := []cove.CommandOption{
				cove.OnStdout(func(b []byte) { _, _ = cmd.OutOrStdout().Write(b) }),
				cove.OnStderr(func(b []byte) { _, _ = cmd.ErrOrStderr().Write(b) }),
				cove.WithEnvs(e),
			}
			if user != "" {
				opts = append(opts, cove.WithUser(user))
			}
			if cwd != "" {
				opts = append(opts, cove.WithCwd(cwd))
			}
			_, err = sbx.Commands.Run(cmd.Context(), shellJoin(args[1:]), opts...)
			var exitErr *cove.CommandExitError
			if errors.As(err, &exitErr) {
				return exitCodeError{code: max(1, min(exitErr.ExitCode, 255))}
			}
			return explain(c, err, args[0])
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "run as this user (user or root)")
	cmd.Flags().StringVarP(&cwd, "cwd", "w", "", "working directory")
	cmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "environment variable key=value (repeatable)")
	return cmd
}

// shellJoin quotes args for bash -c; a single argument is taken as a
// command line as it is.
func shellJoin(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
