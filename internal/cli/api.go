package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/server"
)

func apiCmd() *cobra.Command {
	var r runFlags
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Run an API replica of a cluster: the E2B-compatible API and sandbox proxy over the cluster's nodes",
		Long: `Run an API replica of a Cove cluster: the E2B-compatible REST API and the sandbox
proxy, as cove server serves them, with the state in the cluster's PostgreSQL
database (--database) and the sandboxes on the nodes (cove node) that report
themselves there. Replicas keep nothing of their own: run as many as needed
behind one address; any of them answers any request.

Template builds, snapshots, and resuming a paused sandbox on another node
when its own is lost need an object store the nodes share (--object-store,
an S3-compatible bucket, on the replicas and the nodes); without one,
sandboxes start from the base template and the built-in ones. Forks and
volumes work either way (a volume lives on one node).

Every flag can also be set through its environment variable.`,
		Args: cobra.NoArgs,
		RunE: r.run(server.RunAPI),
	}
	f := cmd.Flags()
	r.common(f, "127.0.0.1:3000", "address for the API and the sandbox proxy")
	r.api(f)
	r.metrics(f)
	r.teams(f)
	r.cluster(f)
	r.base(f)
	f.DurationVar(&r.cfg.NodeLease, "node-lease", 8*time.Second, "how long a node may go without reporting itself before it is taken for lost and its sandboxes for gone")
	return cmd
}
