package cli

import (
	"context"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

func volumeDeleteCmd() *cobra.Command {
	return deleteCmd("delete NAME|ID...", "Delete volumes and their files (sandboxes mounting them keep them until they end)",
		func(ctx context.Context, c *cove.Client, ref string) error { return c.DeleteVolume(ctx, ref) })
}
