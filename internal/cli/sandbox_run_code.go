package cli

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxRunCodeCmd() *cobra.Command {
	var (
		language, out string
		envs          []string
	)
	cmd := &cobra.Command{
		Use:   "run-code SANDBOX [FILE|-]",
		Short: "Run code in a sandbox's code interpreter (code-interpreter-v1), printing its output and text results",
		Long: `Run code (from FILE, or standard input) in the sandbox's code interpreter,
in the language's default context: state is kept between runs. The
language is FILE's by its extension (.py, .js, .mjs, .ts, .r, .sh, .java),
--language's when given, else Python. Output and
text results are printed as they come; images (PNG, JPEG, SVG) are saved
in --out as result-N.png and so on. An exception in the code prints its
traceback and exits 1.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			e, err := keyValues(envs, "env")
			if err != nil {
				return err
			}
			var src io.Reader = cmd.InOrStdin()
			if language == "" && len(args) == 2 {
				language = languageOf(args[1])
			}
			if len(args) == 2 && args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				src = f
			}
			code, err := io.ReadAll(io.LimitReader(src, 16<<20))
			if err != nil {
				return err
			}
			sbx, err := c.Connect(cmd.Context(), args[0], 0)
			if err != nil {
				return explain(c, err, args[0])
			}
			saved := 0
			opts := cove.RunCodeOptions{
				Language: language,
				Envs:     e,
				OnStdout: func(m cove.OutputMessage) { fmt.Fprint(cmd.OutOrStdout(), m.Line) },
				OnStderr: func(m cove.OutputMessage) { fmt.Fprint(cmd.ErrOrStderr(), m.Line) },
				OnResult: func(r cove.Result) {
					for _, img := range []struct{ ext, data string }{{"png", r.PNG}, {"jpeg", r.JPEG}} {
						if img.data == "" {
							continue
						}
						b, err := base64.StdEncoding.DecodeString(img.data)
						if err == nil {
							saved++
							err = saveResult(cmd, out, fmt.Sprintf("result-%d.%s", saved, img.ext), b)
						}
						if err != nil {
							fmt.Fprintf(cmd.ErrOrStderr(), "cove: save an image: %v\n", err)
						}
					}
					if r.SVG != "" {
						saved++
						if err := saveResult(cmd, out, fmt.Sprintf("result-%d.svg", saved), []byte(r.SVG)); err != nil {
							fmt.Fprintf(cmd.ErrOrStderr(), "cove: save an image: %v\n", err)
						}
					}
					if r.Text != "" && (r.IsMainResult || r.PNG == "" && r.JPEG == "" && r.SVG == "") {
						fmt.Fprintln(cmd.OutOrStdout(), r.Text)
					}
				},
			}
			exec, err := sbx.Code.RunCode(cmd.Context(), string(code), opts)
			if err != nil {
				return explainRunCode(c, err, args[0])
			}
			if exec.Error != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), exec.Error.Traceback)
				return exitCodeError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&language, "language", "l", "", "python, javascript, typescript, r, java or bash (default: FILE's by its extension, else python)")
	cmd.Flags().StringVarP(&out, "out", "o", ".", "directory images are saved in")
	cmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "environment variable key=value for this run (repeatable)")
	return cmd
}

// languageOf is the code interpreter's language for a file of that
// name, by its extension; "" (the default, Python) for others.
func languageOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".py":
		return "python"
	case ".js", ".mjs", ".cjs":
		return "javascript"
	case ".ts", ".mts":
		return "typescript"
	case ".r":
		return "r"
	case ".sh", ".bash":
		return "bash"
	case ".java", ".jsh":
		return "java"
	}
	return ""
}

// explainRunCode says that a sandbox whose code interpreter port is closed
// was not made from a code interpreter template, and how to make one.
func explainRunCode(c *cove.Client, err error, sandboxID string) error {
	var ae *cove.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway {
		return explain(c, err, sandboxID)
	}
	tmpl := "its template"
	if info, ierr := c.Info(context.Background(), sandboxID); ierr == nil {
		tmpl = "its template, " + cmp.Or(info.Name, info.TemplateID) + ","
	}
	return fmt.Errorf("sandbox %s has no code interpreter: %s does not run one (port 49999 is closed). "+
		"run-code needs a sandbox of code-interpreter-v1 or of a template built FROM it: "+
		"`cove sandbox create --template code-interpreter-v1` (%v)", sandboxID, tmpl, err)
}

func saveResult(cmd *cobra.Command, dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "saved %s\n", path)
	return nil
}
