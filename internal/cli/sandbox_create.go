package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxCreateCmd() *cobra.Command {
	var (
		template   string
		timeout    time.Duration
		meta, envs []string
		volumes    []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			m, err := keyValues(meta, "metadata")
			if err != nil {
				return err
			}
			e, err := keyValues(envs, "env")
			if err != nil {
				return err
			}
			opts := cove.CreateOptions{Template: template, Timeout: timeout, Metadata: m, Envs: e}
			for _, v := range volumes {
				name, path, ok := strings.Cut(v, ":")
				if !ok || name == "" || path == "" {
					return fmt.Errorf("--volume %q: NAME:/path", v)
				}
				if opts.Volumes == nil {
					opts.Volumes = map[string]string{}
				}
				opts.Volumes[path] = name
			}
			sbx, err := c.Create(cmd.Context(), opts)
			if ae := (*cove.APIError)(nil); errors.As(err, &ae) && ae.Code == cove.CodeTemplatePreparing {
				// A built-in template not built yet: follow its build, then create.
				fmt.Fprintf(cmd.ErrOrStderr(), "template %s is being prepared; following it\n", template)
				if err := prepare(cmd, c, template, cmd.ErrOrStderr()); err != nil {
					return err
				}
				sbx, err = c.Create(cmd.Context(), opts)
			}
			if err != nil {
				return explain(c, err, "")
			}
			fmt.Fprintln(cmd.OutOrStdout(), sbx.ID)
			return nil
		},
	}
	cmd.Flags().StringVarP(&template, "template", "t", "base", "template name or id")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long the sandbox lives")
	cmd.Flags().StringArrayVarP(&meta, "metadata", "m", nil, "metadata key=value (repeatable)")
	cmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "environment variable key=value for every process (repeatable)")
	cmd.Flags().StringArrayVarP(&volumes, "volume", "v", nil, "mount a volume read-write: NAME:/path (repeatable)")
	return cmd
}
