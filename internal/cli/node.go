package cli

import (
	"github.com/spf13/cobra"

	"github.com/covesandbox/cove/internal/server"
)

func nodeCmd() *cobra.Command {
	var r runFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node of a cluster: this host's sandboxes, for the cluster's API replicas (cove api)",
		Long: `Run a node of a Cove cluster: sandboxes on this machine, served to the cluster's
API replicas (cove api) over the node API on --listen, which they reach at
--advertise and call with --node-token. The node reports itself every second
to the cluster's PostgreSQL database (--database); a replica takes a node
silent for longer than its lease for lost, and its sandboxes for gone.

Every flag can also be set through its environment variable.`,
		Args: cobra.NoArgs,
		RunE: r.run(server.RunNode),
	}
	f := cmd.Flags()
	r.common(f, "127.0.0.1:3100", "address of the node API")
	r.sandboxes(f)
	r.metrics(f)
	r.teams(f)
	r.cluster(f)
	r.recipes(f)
	r.base(f)
	f.StringVar(&r.cfg.NodeName, "name", envOr("COVE_NODE_NAME", ""), "the node's name in its cluster (COVE_NODE_NAME; default: the host's name)")
	f.StringVar(&r.cfg.NodeURL, "advertise", envOr("COVE_NODE_ADVERTISE", ""), "the URL API replicas reach the node API at (COVE_NODE_ADVERTISE; default: http:// and the listen address)")
	return cmd
}
