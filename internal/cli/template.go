package cli

import "github.com/spf13/cobra"

// templateCmd groups the template verbs (over the Go SDK, as sandbox's).
func templateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Aliases: []string{"tpl"},
		Short:   "Build, list, cancel and delete sandbox templates on a Cove server",
	}
	cmd.AddCommand(templateBuildCmd(), templateListCmd(), templateDeleteCmd(), templatePrepareCmd(), templateCancelCmd())
	return cmd
}
