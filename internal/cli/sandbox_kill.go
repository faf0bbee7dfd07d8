package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func sandboxKillCmd() *cobra.Command {
	var (
		all  bool
		meta []string
	)
	cmd := &cobra.Command{
		Use:   "kill SANDBOX... | --all [-m key=value]",
		Short: "Kill sandboxes",
		Args: func(cmd *cobra.Command, args []string) error {
			if all != (len(args) == 0) {
				return fmt.Errorf("name sandboxes or give --all, not both")
			}
			if len(meta) > 0 && !all {
				return fmt.Errorf("--metadata selects sandboxes for --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if all {
				m, err := keyValues(meta, "metadata")
				if err != nil {
					return err
				}
				list, err := c.List(cmd.Context(), cove.ListOptions{Metadata: m})
				if err != nil {
					return explain(c, err, "")
				}
				for _, s := range list {
					args = append(args, s.ID)
				}
			}
			var errs []error
			for _, id := range args {
				if err := c.Kill(cmd.Context(), id); err != nil {
					errs = append(errs, explain(c, err, id))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "killed %s\n", id)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "kill every sandbox of the key's team")
	cmd.Flags().StringArrayVarP(&meta, "metadata", "m", nil, "with --all: only sandboxes with this metadata key=value (repeatable)")
	return cmd
}
