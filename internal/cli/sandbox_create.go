package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxCreateCmd() *cobra.Command {
	var (
		template   string
		timeout    time.Duration
		meta, envs []string
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
			sbx, err := c.Create(cmd.Context(), cove.CreateOptions{Template: template, Timeout: timeout, Metadata: m, Envs: e})
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
	return cmd
}
