package cli

import (
	"context"
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
			return explain(c, attachTerminal(cmd, sbx, cove.PTYOptions{User: user}), args[0])
		},
	}
	cmd.Flags().StringVarP(&user, "user", "u", "", "log in as this user (user or root)")
	return cmd
}

// attachTerminal runs a terminal in the sandbox with this process's
// terminal (raw, resized with it) or stdin and stdout; the result is the
// terminal's exit.
func attachTerminal(cmd *cobra.Command, sbx *cove.Sandbox, opts cove.PTYOptions) error {
	in := int(os.Stdin.Fd())
	opts.Cols, opts.Rows = 80, 24
	if term.IsTerminal(in) {
		if w, h, err := term.GetSize(in); err == nil {
			opts.Cols, opts.Rows = uint16(w), uint16(h)
		}
	}
	t, err := sbx.PTY.Create(cmd.Context(), opts)
	if err != nil {
		return err
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
	return exitCode(err)
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
