package main

import (
	"context"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// clusterFigures measures a cluster (API replicas and nodes) beside a
// `cove server` on the same machine, the same figures on each: a command's
// round trip in a running sandbox (the cluster's adds the hop from the API
// replica to the node), create → first output, and creates per second.
func clusterFigures(ctx context.Context, server, cluster *cove.Client, n int, sustain time.Duration) {
	for _, c := range []struct {
		name   string
		client *cove.Client
	}{{"server", server}, {"cluster", cluster}} {
		s := create(ctx, c.client)
		var rtt []time.Duration
		for range n {
			time.Sleep(pace)
			t := time.Now()
			run(ctx, s, "true")
			rtt = append(rtt, time.Since(t))
		}
		check(kill(ctx, s))
		report("Cluster/"+c.name+"/ExecRTT", rtt, "")
		firstOutput(ctx, c.client, "Cluster/"+c.name+"/first-output", n)
		sustained(ctx, c.client, "Cluster/"+c.name+"/sustained", sustain)
	}
}
