package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func sandboxCpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of a sandbox (SANDBOX:/path on one side; - is stdin or stdout)",
		Example: `  cove sandbox cp data.csv i1a2b3c4:/home/user/data.csv
  cove sandbox cp i1a2b3c4:/home/user/out.png ./out.png`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcID, srcPath, srcRemote := remotePath(args[0])
			dstID, dstPath, dstRemote := remotePath(args[1])
			if srcRemote == dstRemote {
				return fmt.Errorf("exactly one of SRC and DST must be SANDBOX:/path")
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if dstRemote {
				in := io.Reader(cmd.InOrStdin())
				if srcPath != "-" {
					f, err := os.Open(srcPath)
					if err != nil {
						return err
					}
					defer f.Close()
					if st, err := f.Stat(); err == nil && st.IsDir() {
						return fmt.Errorf("%s is a directory: cp copies one file", srcPath)
					}
					in = f
				}
				sbx, err := c.Connect(ctx, dstID, 0)
				if err != nil {
					return explain(c, err, dstID)
				}
				_, err = sbx.Files.Write(ctx, dstPath, in)
				return explain(c, err, dstID)
			}
			sbx, err := c.Connect(ctx, srcID, 0)
			if err != nil {
				return explain(c, err, srcID)
			}
			r, err := sbx.Files.Read(ctx, srcPath)
			if err != nil {
				return explain(c, err, srcID)
			}
			defer r.Close()
			out := cmd.OutOrStdout()
			if dstPath != "-" {
				f, err := os.Create(dstPath)
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			_, err = io.Copy(out, r)
			return err
		},
	}
}

// remotePath splits "SANDBOX:/path"; local paths (with no colon before the
// first slash) are not remote.
func remotePath(arg string) (id, path string, remote bool) {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.Contains(arg[:i], "/") {
		return "", arg, false
	}
	return arg[:i], arg[i+1:], true
}
