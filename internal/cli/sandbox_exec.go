package cli

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// exitCodeError makes the process exit with a command's code.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return "" }

// exitCode turns a command's exit into the CLI's own.
func exitCode(err error) error {
	var exitErr *cove.CommandExitError
	if errors.As(err, &exitErr) {
		return exitCodeError{code: max(1, min(exitErr.ExitCode, 255))}
	}
	return err
}

func sandboxExecCmd() *cobra.Command {
	var (
		user, cwd  string
		envs       []string
		stdin, tty bool
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
			if tty {
				return explain(c, attachTerminal(cmd, sbx, cove.PTYOptions{
					Command: shellJoin(args[1:]), User: user, Cwd: cwd, Envs: e}), args[0])
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
			if !stdin {
				_, err = sbx.Commands.Run(cmd.Context(), shellJoin(args[1:]), opts...)
				return explain(c, exitCode(err), args[0])
			}
			h, err := sbx.Commands.Start(cmd.Context(), shellJoin(args[1:]), append(opts, cove.WithStdin())...)
			if err != nil {
				return explain(c, err, args[0])
			}
			go forwardStdin(cmd.Context(), h, cmd.InOrStdin())
			_, err = h.Wait(cmd.Context())
			return explain(c, exitCode(err), args[0])
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "run as this user (user or root)")
	cmd.Flags().StringVarP(&cwd, "cwd", "w", "", "working directory")
	cmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "environment variable key=value (repeatable)")
	cmd.Flags().BoolVarP(&stdin, "interactive", "i", false, "pass stdin to the command (closed at its end)")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (raw mode when stdin is one)")
	return cmd
}

// forwardStdin sends r to the command's stdin in chunks and closes it at
// the end of r.
func forwardStdin(ctx context.Context, h *cove.CommandHandle, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if h.SendStdin(ctx, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = h.CloseStdin(ctx)
			return
		}
	}
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
