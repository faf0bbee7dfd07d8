package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func templateBuildCmd() *cobra.Command {
	var (
		file, name, readyCmd string
		isolation            string
		cpu, memory          int
		buildArgs, tags      []string
		force                bool
	)
	cmd := &cobra.Command{
		Use:   "build [CONTEXT]",
		Short: "Build a template from a Dockerfile",
		Long: `Build a template from a Dockerfile (FROM, RUN, COPY, ADD of local files, ENV,
WORKDIR, USER, ARG, CMD as the start command). FROM names a template of the
server (a built-in one, such as base or code-interpreter-v1, or one of the
team's: its start command runs unless CMD replaces it) or else an image (a
registry reference; oci:DIR or docker-archive:FILE on the server when it
allows local images). Every step is
cached by its inputs: an unchanged rebuild takes a moment.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			contextDir := "."
			if len(args) == 1 {
				contextDir = args[0]
			}
			if file == "" {
				file = filepath.Join(contextDir, "Dockerfile")
			}
			if name == "" {
				return errors.New("--name is required")
			}
			values, err := keyValues(buildArgs, "build-arg")
			if err != nil {
				return err
			}
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			df, err := cove.ParseDockerfile(f, contextDir, values)
			f.Close()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range df.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			// FROM goes as an image, as E2B's SDKs send it: the server
			// builds on its template of that name when it has one.
			b := cove.TemplateBuild{Name: name, Tags: tags, CPUCount: cpu, MemoryMB: memory, Steps: df.Steps,
				StartCmd: df.StartCmd, ReadyCmd: readyCmd, Force: force, Isolation: isolation, FromImage: df.From}
			start := time.Now()
			fmt.Fprintf(out, "building %s from %s (%d steps)\n", name, df.From, len(df.Steps))
			built, err := c.BuildTemplate(cmd.Context(), b, func(l cove.BuildLog) {
				prefix := "      "
				if l.Step != "" {
					prefix = fmt.Sprintf("[%3s] ", l.Step)
				}
				fmt.Fprintf(out, "%s%s\n", prefix, l.Message)
			})
			if err != nil {
				var be *cove.BuildError
				if errors.As(err, &be) {
					return be
				}
				return explain(c, err, "")
			}
			fmt.Fprintf(out, "built %s (template %s, build %s) in %s\n", name, built.TemplateID, built.BuildID,
				time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "the Dockerfile (default CONTEXT/Dockerfile)")
	f.StringVarP(&name, "name", "n", "", "the template's name (name or name:tag)")
	f.IntVar(&cpu, "cpu", 0, "CPUs of its sandboxes (default 2)")
	f.IntVar(&memory, "memory", 0, "memory of its sandboxes in MiB (default 1024)")
	f.StringArrayVar(&buildArgs, "build-arg", nil, "an ARG value, NAME=value (repeatable)")
	f.StringArrayVar(&tags, "tag", nil, "a tag for the build (repeatable; default: default)")
	f.StringVar(&readyCmd, "ready-cmd", "", "a command that exits 0 once the start command (CMD) is ready")
	f.BoolVar(&force, "force", false, "rebuild every step, cached or not")
	f.StringVar(&isolation, "isolation", "", "the driver its sandboxes run on when they ask for none: namespaces, gvisor or microvm (default: the server's)")
	return cmd
}
