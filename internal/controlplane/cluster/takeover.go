package cluster

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// A sandbox paused without its memory, in a cluster with an object store,
// has its files there and its node's record of it in its own record (its
// paused state). When its node is lost the record stays, on no node
// (store.Members.ForgetSandboxesOn), and its resume (or connect) has a
// live node take it over (Receive) and boot it: the same id, tokens and
// files.

// keepPausedState records what another node would take a sandbox over
// from: its shared paused state while paused, nothing otherwise.
func (c *Cluster) keepPausedState(ctx context.Context, info sandboxes.Info) {
	var state []byte
	if info.State == sandboxes.StatePaused {
		state = info.PausedState
	}
	if err := c.members.SetPausedState(ctx, info.ID, state); err != nil {
		c.log.Warn("record a sandbox's paused state", logx.SandboxID(info.ID), logx.Err(err))
	}
}

// orphaned returns a paused sandbox whose node was lost, as its paused
// state describes it (on no node).
func (c *Cluster) orphaned(ctx context.Context, id string) (sandboxes.Info, bool) {
	sb, err := c.records.Sandbox(ctx, id)
	if err != nil || sb.Node != "" {
		return sandboxes.Info{}, false
	}
	state, err := c.members.PausedState(ctx, id)
	if err != nil || len(state) == 0 {
		return sandboxes.Info{}, false
	}
	var info sandboxes.Info
	if err := json.Unmarshal(state, &info); err != nil || info.ID != id {
		c.log.Error("unreadable paused state", logx.SandboxID(id), logx.Err(err))
		return sandboxes.Info{}, false
	}
	info.Node, info.PausedState, info.State = "", state, sandboxes.StatePaused
	return info, true
}

// takeOver has a live node take over info, a paused sandbox whose node
// was lost: its record is moved to the node first (one replica wins
// when several try), then the node receives it; a node that cannot
// gives it back for the next. A replica that dies in between leaves it
// recorded on a node that lacks it: the next to follow that node frees
// it again (catchUp).
func (c *Cluster) takeOver(ctx context.Context, info sandboxes.Info) error {
	var why []string
	for _, m := range c.candidates(info.Isolation, info.TemplateID) {
		won, err := c.members.MoveSandbox(ctx, info.ID, "", m.id)
		if err != nil {
			return err
		}
		if !won {
			return nil // another replica took it over: found where it went
		}
		got, err := m.client.Receive(ctx, info)
		if err == nil {
			got.Node = m.id
			c.learn(got)
			c.log.Info("paused sandbox taken over from its lost node", logx.SandboxID(info.ID), "node", m.id)
			return nil
		}
		if _, rerr := c.members.MoveSandbox(context.WithoutCancel(ctx), info.ID, m.id, ""); rerr != nil {
			c.log.Error("give back a sandbox a node could not take over", logx.SandboxID(info.ID), "node", m.id, logx.Err(rerr))
		}
		if ctx.Err() != nil || !errs.Is(err, errs.Unavailable) && !errs.Is(err, errs.ResourceExhausted) {
			return err
		}
		why = append(why, m.id+": "+err.Error())
	}
	if len(why) == 0 {
		return errs.New(errs.Unavailable, "sandbox %s's node is lost and no node of the cluster is available to take it over", info.ID)
	}
	return errs.New(errs.Unavailable, "sandbox %s's node is lost and no node could take it over: %s", info.ID, strings.Join(why, "; "))
}

// PausedBlobs are the archives in the object store that the paused
// states name: the bucket's sweep keeps them.
func (c *Cluster) PausedBlobs(ctx context.Context) (map[string]bool, error) {
	states, err := c.members.PausedStates(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range states {
		var info sandboxes.Info
		if err := json.Unmarshal(s, &info); err != nil {
			return nil, errs.New(errs.DataLoss, "an unreadable paused state: %v", err)
		}
		if f := info.Rest.Files; f != nil {
			for _, d := range f.Blobs {
				out[d] = true
			}
		}
	}
	return out, nil
}
