package cove

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Snapshot is a saved copy of a sandbox's files — and, on gVisor, of its
// running processes — which sandboxes start from as they do from a
// template (CreateOptions.Template = ID).
type Snapshot struct {
	ID    string   `json:"snapshotID"` // name:tag, or template id:tag when unnamed
	Names []string `json:"names"`
}

// Snapshot saves the sandbox's state (see Client.CreateSnapshot).
func (s *Sandbox) Snapshot(ctx context.Context, name string) (Snapshot, error) {
	return s.client.CreateSnapshot(ctx, s.ID, name)
}

// CreateSnapshot saves a sandbox's files (on gVisor, and in a microVM
// guest whose template shares no host directory, its processes too:
// sandboxes from it run them on) as a snapshot named name ("" for an
// unnamed one; the name of an existing snapshot gets a new version). The
// sandbox is frozen for the copy only and goes on.
func (c *Client) CreateSnapshot(ctx context.Context, sandboxID, name string) (Snapshot, error) {
	return c.createSnapshot(ctx, sandboxID, name, true)
}

// SnapshotWithoutMemory saves the sandbox's files alone (see
// Client.CreateSnapshotWithoutMemory).
func (s *Sandbox) SnapshotWithoutMemory(ctx context.Context, name string) (Snapshot, error) {
	return s.client.CreateSnapshotWithoutMemory(ctx, s.ID, name)
}

// CreateSnapshotWithoutMemory is CreateSnapshot keeping the sandbox's
// files alone, on every driver: sandboxes from it start afresh on them
// (E2B's snapshot mode "filesystem").
func (c *Client) CreateSnapshotWithoutMemory(ctx context.Context, sandboxID, name string) (Snapshot, error) {
	return c.createSnapshot(ctx, sandboxID, name, false)
}

func (c *Client) createSnapshot(ctx context.Context, sandboxID, name string, memory bool) (Snapshot, error) {
	body := map[string]any{}
	if name != "" {
		body["name"] = name
	}
	if !memory {
		body["memory"] = false
	}
	var out Snapshot
	_, err := c.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sandboxID)+"/snapshots", body, &out)
	return out, err
}

// SnapshotFilter narrows ListSnapshots (zero fields: any).
type SnapshotFilter struct {
	SandboxID string // snapshots of this sandbox
	Name      string // snapshots of this name
}

// ListSnapshots returns the team's snapshots, newest first.
func (c *Client) ListSnapshots(ctx context.Context, f SnapshotFilter) ([]Snapshot, error) {
	q := url.Values{}
	if f.SandboxID != "" {
		q.Set("sandboxID", f.SandboxID)
	}
	if f.Name != "" {
		q.Set("name", f.Name)
	}
	return listAll[Snapshot](ctx, c, "/snapshots", q)
}

// DeleteSnapshot deletes a snapshot; sandboxes started from it go on. An
// unknown one is ErrNotFound.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.DeleteTemplate(ctx, id)
}

// Fork starts count sandboxes from a copy of the sandbox (see Client.Fork).
func (s *Sandbox) Fork(ctx context.Context, count int, timeout time.Duration) ([]*Sandbox, error) {
	return s.client.Fork(ctx, s.ID, count, timeout)
}

// Fork saves a sandbox's files (on gVisor, and in a microVM guest whose
// template shares no host directory, its processes too, which each child
// runs on) once and starts count sandboxes from them (each with the
// parent's template, environment, metadata and network rules), living
// timeout (0: the server's default of 15 s). Each child
// starts or fails on its own: the result has one entry per child, nil
// where it failed, and the error joins the failures.
func (c *Client) Fork(ctx context.Context, sandboxID string, count int, timeout time.Duration) ([]*Sandbox, error) {
	body := map[string]any{"count": count}
	if timeout > 0 {
		body["timeout"] = int64((timeout + time.Second - 1) / time.Second)
	}
	var results []struct {
		Sandbox *sandboxJSON `json:"sandbox"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sandboxID)+"/fork", body, &results); err != nil {
		return nil, err
	}
	out := make([]*Sandbox, len(results))
	var failed []error
	for i, r := range results {
		switch {
		case r.Sandbox != nil:
			out[i] = c.attach(*r.Sandbox)
		case r.Error != nil:
			failed = append(failed, fmt.Errorf("fork %d: %d: %s", i, r.Error.Code, r.Error.Message))
		default:
			failed = append(failed, fmt.Errorf("fork %d: no sandbox and no error", i))
		}
	}
	return out, errors.Join(failed...)
}
