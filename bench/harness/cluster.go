package main

import (
	"context"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// clusterFigures measures a cluster (API replicas and nodes) beside a
// `cove server` on the same machine, the same figures on each: a command's
// round trip in a running sandbox (the cluster's adds the hop from the API
// replica to the node), a pause with and without memory and their resumes
// (a cluster with an object store also shares the files of each paused
// sandbox there, for another node to resume it if its own is lost),
// create → first output, and creates per second.
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
		var pause, resume, pauseFiles, resumeFiles []time.Duration
		run(ctx, s, "head -c 10M /dev/urandom > ~/big && for i in $(seq 100); do echo $i > ~/f$i; done")
		for range n {
			t0 := time.Now()
			check(c.client.Pause(ctx, s.ID))
			t1 := time.Now()
			_, err := c.client.Resume(ctx, s.ID, 10*time.Minute)
			check(err)
			t2 := time.Now()
			check(c.client.PauseWithoutMemory(ctx, s.ID))
			t3 := time.Now()
			_, err = c.client.Resume(ctx, s.ID, 10*time.Minute)
			check(err)
			pause, resume = append(pause, t1.Sub(t0)), append(resume, t2.Sub(t1))
			pauseFiles, resumeFiles = append(pauseFiles, t3.Sub(t2)), append(resumeFiles, time.Since(t3))
			run(ctx, s, "echo hi")
			time.Sleep(pace)
		}
		check(kill(ctx, s))
		report("Cluster/"+c.name+"/ExecRTT", rtt, "")
		report("Cluster/"+c.name+"/pause", pause, "")
		report("Cluster/"+c.name+"/resume", resume, "")
		report("Cluster/"+c.name+"/pause-files", pauseFiles, "")
		report("Cluster/"+c.name+"/resume-files", resumeFiles, "")
		firstOutput(ctx, c.client, "Cluster/"+c.name+"/first-output", n)
		sustained(ctx, c.client, "Cluster/"+c.name+"/sustained", sustain)
	}
}
