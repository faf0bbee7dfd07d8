package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func teamListCmd() *cobra.Command {
	var state stateFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List teams, their keys and quotas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := state.open(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			teams, err := st.Teams(ctx)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tID\tKEYS\tMAX SANDBOXES\tMAX CPUS\tMAX MEMORY MB\tMAX DISK MB\tMAX STORAGE MB\tCREATED")
			for _, t := range teams {
				keys, err := st.TeamAPIKeys(ctx, t.ID)
				if err != nil {
					return err
				}
				q := t.Quota
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.ID, len(keys), orServer(int64(q.MaxSandboxes)), orServer(int64(q.MaxCPUs)),
					orServer(q.MaxMemoryMB), orServer(q.MaxDiskMB), orServer(q.MaxStorageMB), t.CreatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	state.add(cmd)
	return cmd
}

// orServer shows a team's quota; 0 is the server's.
func orServer(n int64) string {
	if n == 0 {
		return "server's"
	}
	return strconv.FormatInt(n, 10)
}
