package service

import (
	"context"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// MaxForks bounds the children of one fork (E2B's limit).
const MaxForks = 100

// forkParallel is how many children of a fork start at once.
const forkParallel = 4

// ForkResult is one child of a fork: its sandbox, or why it did not start.
type ForkResult struct {
	Sandbox Sandbox
	Err     error
}

// Fork saves a team's sandbox's files once (frozen for the copy only) —
// and its processes, on a driver that can copy them (isolation.Cloner) —
// and starts count sandboxes from them, each with the parent's template
// build, size, environment, metadata, network rules and settings, living
// timeout: with the processes, each runs them on from where the parent
// was; without, each boots. Each child starts or fails on its own; the
// parent goes on.
func (s *Service) Fork(ctx context.Context, team, id string, count int, timeout time.Duration) ([]ForkResult, error) {
	if count < 1 || count > MaxForks {
		return nil, errs.New(errs.InvalidArgument, "count must be between 1 and %d", MaxForks)
	}
	if err := s.checkTimeout(timeout); err != nil {
		return nil, err
	}
	parent, err := s.Get(ctx, team, id)
	if err != nil {
		return nil, err
	}
	c, err := s.node.SaveLayer(ctx, id, true)
	if err != nil {
		return nil, err
	}
	defer c.Release() // the children stack the layer once started
	info, sum := c.Info, c.Layer
	req := CreateRequest{Alias: parent.Alias, AllowInternetAccess: parent.AllowInternetAccess, CreateRequest: sandboxes.CreateRequest{
		Team: team, Template: info.TemplateID, BuildID: info.BuildID, Layers: info.Layers, Saved: &sum,
		Timeout: timeout, Metadata: parent.Metadata, EnvVars: info.EnvVars, Secure: parent.Secure,
		PublicTraffic: parent.PublicTraffic, Settings: info.Settings, Isolation: info.Isolation,
		Volumes: info.Volumes, Image: c.Image, Node: info.Node,
		// Its size, which a create may have asked for.
		Limits: isolation.Limits{CPUMillis: info.Limits.CPUMillis, MemoryMB: info.Limits.MemoryMB},
	}}
	if n := info.Network; n != nil { // its parent's rules, parsed already
		req.AllowOut, req.DenyOut, req.AllowDomains = n.AllowOut, n.DenyOut, n.AllowDomains
		req.Rules, req.EgressProxy, req.Tokens = n.Rules, n.EgressProxy, n.Tokens
	}
	out := make([]ForkResult, count)
	sem := make(chan struct{}, forkParallel)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i].Sandbox, out[i].Err = s.Create(ctx, req)
		}()
	}
	wg.Wait()
	started := 0
	for _, r := range out {
		if r.Err == nil {
			started++
		}
	}
	s.log.Info("sandbox forked", logx.SandboxID(id), "layer", sum.Name, "processes", c.Image != nil, "asked", count, "started", started)
	return out, nil
}
