package server

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/network"
)

// nodesEvery is how often a cluster role reads its nodes' addresses,
// which requests made for tenants never reach (addrpolicy).
const nodesEvery = 10 * time.Second

// registryPolicy is the address policy of image pulls: the operator's
// --registry-allow, never a sandbox range; nodes, in a cluster, are the
// nodes' own addresses (nil: none but this host's).
func registryPolicy(cfg Config, nodes *addrpolicy.Nodes) *addrpolicy.Policy {
	ranges := []netip.Prefix{network.DefaultRange}
	if cfg.Network != nil && cfg.Network.Range.IsValid() {
		ranges = append(ranges, cfg.Network.Range)
	}
	pc := addrpolicy.Config{Allow: cfg.RegistryAllow, Flag: "--registry-allow", Never: func() []netip.Prefix { return ranges }}
	if nodes != nil {
		pc.Nodes = nodes.Addrs
	}
	return addrpolicy.New(pc)
}

// watchNodes keeps nodes' addresses from the cluster's membership (the
// URLs nodes registered) until ctx ends.
func watchNodes(ctx context.Context, members store.Members, log *slog.Logger) *addrpolicy.Nodes {
	nodes := &addrpolicy.Nodes{}
	go nodes.Watch(ctx, nodesEvery, func(ctx context.Context) ([]string, error) {
		ms, err := members.Members(ctx)
		urls := make([]string, len(ms))
		for i, m := range ms {
			urls[i] = m.URL
		}
		return urls, err
	}, log)
	return nodes
}
