package cli

import (
	"context"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func snapshotDeleteCmd() *cobra.Command {
	return deleteCmd("delete SNAPSHOT...", "Delete snapshots (sandboxes started from them go on)",
		func(ctx context.Context, c *cove.Client, ref string) error { return c.DeleteSnapshot(ctx, ref) })
}
