package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
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

func volumeCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME",
		Short: "Create a volume and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			v, err := c.CreateVolume(cmd.Context(), args[0])
			if err != nil {
				return explain(c, err, "")
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.ID)
			return nil
		},
	}
}

func volumeListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List volumes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			list, err := c.ListVolumes(cmd.Context())
			if err != nil {
				return explain(c, err, "")
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME")
			for _, v := range list {
				fmt.Fprintf(w, "%s\t%s\n", v.ID, v.Name)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func volumeDeleteCmd() *cobra.Command {
	return deleteCmd("delete NAME|ID...", "Delete volumes and their files (sandboxes mounting them keep them until they end)",
		func(ctx context.Context, c *cove.Client, ref string) error { return c.DeleteVolume(ctx, ref) })
}
