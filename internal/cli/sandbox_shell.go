package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxShellCmd() *cobra.Command {
	var user string
	cmd := &cobra.Command{
		Use:   "shell SANDBOX",
		Short: "Open an interactive shell in a sandbox; exits with the shell's exit code",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			sbx, err := c.Connect(cmd.Context(), args[0], 0)
			if err != nil {
				return explain(c, err, args[0])
			}
			in := int(os.Stdin.Fd())
			cols, rows := 80, 24
			if term.IsTerminal(in) {
				if w, h, err := term.GetSize(in); err == nil {
					cols, rows = w, h
				}
			}
			t, err := sbx.PTY.Create(cmd.Context(), cove.PTYOptions{Cols: uint16(cols), Rows: uint16(rows), User: user})
			if err != nil {
				return explain(c, err, args[0])
			}
			if term.IsTerminal(in) {
				old, err := term.MakeRaw(in)
				if err != nil {
					return err
				}
				defer term.Restore(in, old)
				go followSize(cmd.Context(), in, t)
			}
			go func() { _, _ = io.Copy(t, os.Stdin) }()
			_, _ = io.Copy(cmd.OutOrStdout(), t)
			_, err = t.Wait(context.Background())
			var exitErr *cove.CommandExitError
			if errors.As(err, &exitErr) {
				return exitCodeError{code: max(1, min(exitErr.ExitCode, 255))}
			}
			return explain(c, err, args[0])
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "log in as this user (user or root)")
	return cmd
}

// followSize resizes the sandbox's terminal whenever the local one changes.
func followSize(ctx context.Context, fd int, t *cove.Terminal) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
			if w, h, err := term.GetSize(fd); err == nil {
				_ = t.Resize(ctx, uint16(w), uint16(h))
			}
		}
	}
}
