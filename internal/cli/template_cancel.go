package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func templateCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel NAME|ID [BUILD]",
		Short: "Cancel a template's build in progress (its newest, unless BUILD names one)",
		Long: `Cancel a build in progress of one of your team's templates: its processes and
build sandboxes are stopped, what it wrote is removed, and it ends as failed
with a reason that says it was cancelled. Without BUILD, the template's newest
build is cancelled. The template's other builds, and the sandboxes started
from them, go on.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			templateID, buildID := args[0], ""
			if len(args) == 2 {
				buildID = args[1]
			} else if templateID, buildID, err = newestBuild(cmd, c, args[0]); err != nil {
				return err
			}
			status, err := c.CancelBuild(cmd.Context(), templateID, buildID)
			if err != nil {
				return explain(c, err, "")
			}
			if status == "error" {
				fmt.Fprintf(cmd.OutOrStdout(), "cancelled build %s of %s\n", buildID, args[0])
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "build %s of %s is being cancelled (%s)\n", buildID, args[0], status)
			}
			return nil
		},
	}
}

// newestBuild finds a template of the team by id or name and its newest
// build.
func newestBuild(cmd *cobra.Command, c *cove.Client, ref string) (templateID, buildID string, err error) {
	list, err := c.ListTemplates(cmd.Context())
	if err != nil {
		return "", "", explain(c, err, "")
	}
	for _, t := range list {
		if t.TemplateID == ref || slices.Contains(t.Names, ref) {
			if t.BuildID == "" {
				return "", "", fmt.Errorf("template %s has no build", ref)
			}
			return t.TemplateID, t.BuildID, nil
		}
	}
	return "", "", fmt.Errorf("template %s not found", ref)
}
