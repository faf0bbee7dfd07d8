package main

import (
	"context"
	"fmt"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// persistence measures the saved states through the Go SDK on one server
// (driver names it): pause and resume with the memory, without it (the
// files saved, booted again), a snapshot of a sandbox holding 10 MiB in
// 101 files, create → first output from that snapshot, and a fork of 10.
// Each figure is n samples apart from the fork's (n/5 forks of 10).
func persistence(ctx context.Context, c *cove.Client, driver string, n int) {
	s := create(ctx, c)
	run(ctx, s, "head -c 10M /dev/urandom > ~/big && for i in $(seq 100); do echo $i > ~/f$i; done")
	var pause, resume, pauseFiles, resumeFiles, snap, fromSnap, fork []time.Duration
	for range n {
		t0 := time.Now()
		check(c.Pause(ctx, s.ID))
		t1 := time.Now()
		_, err := c.Resume(ctx, s.ID, 10*time.Minute)
		check(err)
		pause, resume = append(pause, t1.Sub(t0)), append(resume, time.Since(t1))
	}
	for range n {
		t0 := time.Now()
		check(c.PauseWithoutMemory(ctx, s.ID))
		t1 := time.Now()
		_, err := c.Resume(ctx, s.ID, 10*time.Minute)
		check(err)
		pauseFiles, resumeFiles = append(pauseFiles, t1.Sub(t0)), append(resumeFiles, time.Since(t1))
		run(ctx, s, "echo hi")
		time.Sleep(pace)
	}
	var last cove.Snapshot
	for range n {
		t0 := time.Now()
		var err error
		last, err = s.Snapshot(ctx, fmt.Sprintf("bench-%s", driver))
		check(err)
		snap = append(snap, time.Since(t0))
		time.Sleep(pace)
	}
	for range n {
		t0 := time.Now()
		child, err := c.Create(ctx, cove.CreateOptions{Template: last.ID, Timeout: time.Minute})
		check(err)
		live.Store(child, struct{}{})
		run(ctx, child, "echo hi")
		fromSnap = append(fromSnap, time.Since(t0))
		check(kill(ctx, child))
		time.Sleep(pace)
	}
	for range max(n/5, 1) {
		t0 := time.Now()
		kids, err := s.Fork(ctx, 10, time.Minute)
		check(err)
		fork = append(fork, time.Since(t0))
		for _, k := range kids {
			check(k.Kill(ctx))
		}
		time.Sleep(pace)
	}
	check(c.DeleteSnapshot(ctx, last.ID))
	check(kill(ctx, s))
	for name, xs := range map[string][]time.Duration{
		"pause": pause, "resume": resume, "pause-files": pauseFiles, "resume-files": resumeFiles,
		"snapshot": snap, "from-snapshot": fromSnap, "fork10": fork,
	} {
		report("Persist/"+driver+"/"+name, xs, "")
	}
}

// diskResume measures a resume from disk: a sandbox (on a server that
// writes paused sandboxes to disk at once, --pause-to-disk-after) paused,
// left until its memory is on disk, then resumed to its first output.
func diskResume(ctx context.Context, c *cove.Client, driver string, n int) {
	s := create(ctx, c)
	var resumes []time.Duration
	for range n {
		check(c.Pause(ctx, s.ID))
		time.Sleep(2 * time.Second) // the checkpoint is done by then
		t0 := time.Now()
		_, err := c.Resume(ctx, s.ID, 10*time.Minute)
		check(err)
		run(ctx, s, "echo hi")
		resumes = append(resumes, time.Since(t0))
	}
	check(kill(ctx, s))
	report("Persist/"+driver+"/resume-from-disk", resumes, "")
}
