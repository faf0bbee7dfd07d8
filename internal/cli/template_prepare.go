package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func templatePrepareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "prepare NAME",
		Short: "Build a built-in template now (debian, code-interpreter-v1, desktop), following its progress",
		Long: `Build a built-in template now instead of on its first use, and follow the build.
debian is debootstrap's bookworm minbase with python3, nodejs, git, curl and sudo
(the server needs debootstrap and Debian's archive); code-interpreter-v1 is the
same on trixie (Python 3.13) with E2B's Python packages from PyPI and the
kernels; desktop adds an XFCE desktop for @e2b/desktop to debian (Xvfb,
xdotool, x11vnc, noVNC). Built once, they are cached.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if err := prepare(cmd, c, args[0], cmd.OutOrStdout()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is ready\n", args[0])
			return nil
		},
	}
}

// prepare follows the build of a built-in template, printing its log to w.
func prepare(cmd *cobra.Command, c *cove.Client, name string, w io.Writer) error {
	err := c.PrepareTemplate(cmd.Context(), name, func(l cove.BuildLog) {
		prefix := "      "
		if l.Step != "" {
			prefix = fmt.Sprintf("[%3s] ", l.Step)
		}
		fmt.Fprintf(w, "%s%s\n", prefix, l.Message)
	})
	if err != nil {
		if be, ok := err.(*cove.BuildError); ok {
			return be
		}
		return explain(c, err, "")
	}
	return nil
}
