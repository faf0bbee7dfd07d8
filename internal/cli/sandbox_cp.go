package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxCpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of a sandbox (SANDBOX:/path on one side; - is stdin or stdout; a directory DST takes the file's name)",
		Example: `  cove sandbox cp data.csv i1a2b3c4:/home/user/data.csv
  cove sandbox cp data.csv i1a2b3c4:/home/user/
  cove sandbox cp i1a2b3c4:/home/user/out.png .`,
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
				if remoteDir(ctx, sbx, dstPath) {
					if srcPath == "-" {
						return fmt.Errorf("%s is a directory: copying stdin needs a file name", args[1])
					}
					dstPath = path.Join(dstPath, filepath.Base(srcPath))
				}
				_, err = sbx.Files.Write(ctx, dstPath, in)
				return explainPath(c, err, dstID, dstPath)
			}
			sbx, err := c.Connect(ctx, srcID, 0)
			if err != nil {
				return explain(c, err, srcID)
			}
			r, err := sbx.Files.Read(ctx, srcPath)
			if err != nil {
				return explainPath(c, err, srcID, srcPath)
			}
			defer r.Close()
			out := cmd.OutOrStdout()
			if dstPath != "-" {
				if st, err := os.Stat(dstPath); err == nil && st.IsDir() {
					dstPath = filepath.Join(dstPath, path.Base(srcPath))
				}
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

// remoteDir reports whether p names a directory in the sandbox (or ends
// in a slash).
func remoteDir(ctx context.Context, sbx *cove.Sandbox, p string) bool {
	if strings.HasSuffix(p, "/") {
		return true
	}
	e, err := sbx.Files.Stat(ctx, p)
	return err == nil && e.Type == "dir"
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
