package cli

import (
	"github.com/spf13/cobra"
)

// volumeCmd groups the volume verbs (mount one with `cove sandbox create
// --volume NAME:/path`).
func volumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"vol"},
		Short:   "Create, list and delete volumes (mount one with `cove sandbox create --volume NAME:/path`)",
	}
	cmd.AddCommand(volumeCreateCmd(), volumeListCmd(), volumeDeleteCmd())
	return cmd
}
