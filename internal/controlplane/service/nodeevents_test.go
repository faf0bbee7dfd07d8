package service_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// lastEvent is the newest lifecycle event of sandbox id: its type and its
// eventData.reason ("" and "" when it has none).
func lastEvent(t *testing.T, svc *service.Service, team, id string) (typ, reason string) {
	t.Helper()
	events, err := svc.Events(context.Background(), service.EventQuery{Team: team, SandboxID: id, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 {
		return "", ""
	}
	var body struct {
		EventData struct {
			Reason string `json:"reason"`
		} `json:"eventData"`
	}
	if err := json.Unmarshal(events[0].Body, &body); err != nil {
		t.Fatalf("event body %s: %v", events[0].Body, err)
	}
	return events[0].Type, body.EventData.Reason
}

// TestNodeEvents: what a node tells the control plane of itself (a
// sandbox that ended, one it paused or resumed) reaches the record and
// the team's events.
func TestNodeEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		happen func(svc *service.Service, n sandboxes.Node, id string)
		state  sandboxes.State // the record's after ("": gone)
		typ    string          // the newest event's
		reason string
	}{
		{"killed", func(svc *service.Service, n sandboxes.Node, id string) {
			svc.Ended(id, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: sandboxes.KilledDetail})
		}, "", store.EventKilled, store.ReasonAPI},
		{"its timeout", func(svc *service.Service, n sandboxes.Node, id string) {
			svc.Ended(id, isolation.Exit{Reason: isolation.ExitDestroyed, Detail: "timeout"})
		}, "", store.EventKilled, store.ReasonTimeout},
		{"out of memory", func(svc *service.Service, n sandboxes.Node, id string) {
			svc.Ended(id, isolation.Exit{Reason: isolation.ExitOOM})
		}, "", store.EventKilled, string(isolation.ExitOOM)},
		{"paused at its timeout", func(svc *service.Service, n sandboxes.Node, id string) {
			info, _ := n.Pause(context.Background(), id, false)
			svc.StateChanged(info)
		}, sandboxes.StatePaused, store.EventPaused, store.ReasonAutoPause},
		{"resumed by traffic", func(svc *service.Service, n sandboxes.Node, id string) {
			info, _ := n.Pause(context.Background(), id, false)
			svc.StateChanged(info)
			info, _ = n.Resume(context.Background(), id, 0)
			svc.StateChanged(info)
		}, sandboxes.StateRunning, store.EventResumed, store.ReasonTraffic},
		{"the news twice", func(svc *service.Service, n sandboxes.Node, id string) {
			// Each API replica hears of the end; the second finds no record.
			svc.Ended(id, isolation.Exit{Reason: isolation.ExitCrashed})
			svc.Ended(id, isolation.Exit{Reason: isolation.ExitCrashed})
		}, "", store.EventKilled, string(isolation.ExitCrashed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, n, st := newService(t, service.Config{})
			ctx := context.Background()
			sb := create(t, svc, nil)
			tc.happen(svc, n, sb.ID)
			rec, err := st.Sandbox(ctx, sb.ID)
			switch {
			case tc.state == "" && !errs.Is(err, errs.NotFound):
				t.Errorf("the record: %+v, %v; want it gone", rec, err)
			case tc.state != "" && (err != nil || rec.State != tc.state):
				t.Errorf("the record: %q, %v; want %q", rec.State, err, tc.state)
			}
			if typ, reason := lastEvent(t, svc, "t", sb.ID); typ != tc.typ || reason != tc.reason {
				t.Errorf("the newest event: %s (%s), want %s (%s)", typ, reason, tc.typ, tc.reason)
			}
			if events, _ := svc.Events(ctx, service.EventQuery{Team: "t", SandboxID: sb.ID, Limit: 100, Types: []string{store.EventKilled}}); len(events) > 1 {
				t.Errorf("%d killed events, want at most one", len(events))
			}
		})
	}
}

// TestSandboxForSignature: a signed file URL names no sandbox; the one
// whose access token made its signature is found, while it runs.
func TestSandboxForSignature(t *testing.T) {
	t.Parallel()
	svc, n, _ := newService(t, service.Config{})
	ctx := context.Background()
	a := create(t, svc, nil)
	b := create(t, svc, nil)
	sign := func(id string, exp int64) string {
		info, err := n.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return envdwire.Signature("/home/user/f", "read", "user", info.AccessToken, exp)
	}
	for _, tc := range []struct {
		name, signature, expiration, want string
	}{
		{"a's", sign(a.ID, 0), "", a.ID},
		{"b's, with an expiry", sign(b.ID, 4102444800), "4102444800", b.ID},
		{"an expiry it was not signed with", sign(b.ID, 4102444800), "4102444801", ""},
		{"an expiry that is no number", sign(b.ID, 0), "soon", ""},
		{"no sandbox's", "v1_bm9ib2R5", "", ""},
	} {
		if got, ok := svc.SandboxForSignature(ctx, "/home/user/f", "read", "user", tc.signature, tc.expiration); got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.name, got, ok, tc.want)
		}
	}
	// A paused sandbox serves no file: its signature finds nothing.
	signed := sign(a.ID, 0)
	if err := svc.Pause(ctx, "t", a.ID, true, false); err != nil {
		t.Fatal(err)
	}
	if got, ok := svc.SandboxForSignature(ctx, "/home/user/f", "read", "user", signed, ""); ok {
		t.Errorf("a paused sandbox's signature found %q", got)
	}
}

// TestUpdateNetwork: a running sandbox's egress changes through its node,
// for its team alone, and the change is an event; a bad rule asks the
// node nothing.
func TestUpdateNetwork(t *testing.T) {
	t.Parallel()
	off := false
	deny := []string{"0.0.0.0/0"}
	bad := []string{"nonsense/99"}
	for _, tc := range []struct {
		name  string
		team  string
		rules service.NetworkRules
		kind  errs.Kind // 0: none
	}{
		{"internet off", "t", service.NetworkRules{Internet: &off}, 0},
		{"deny all", "t", service.NetworkRules{DenyOut: &deny}, 0},
		{"a bad rule", "t", service.NetworkRules{DenyOut: &bad}, errs.InvalidArgument},
		{"another team's sandbox", "u", service.NetworkRules{Internet: &off}, errs.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, n, _ := newService(t, service.Config{})
			ctx := context.Background()
			sb := create(t, svc, nil)
			n.Add(withNetwork(t, n, sb.ID))
			err := svc.UpdateNetwork(ctx, tc.team, sb.ID, tc.rules)
			if got := errs.KindOf(err); err != nil && got != tc.kind || err == nil && tc.kind != 0 {
				t.Fatalf("update: %v (%v), want kind %v", err, got, tc.kind)
			}
			typ, _ := lastEvent(t, svc, "t", sb.ID)
			if updated := typ == store.EventUpdated; updated != (err == nil) {
				t.Errorf("the newest event: %s after %v", typ, err)
			}
		})
	}
}

// withNetwork is sandbox id's record on the fake node with a network.
func withNetwork(t *testing.T, n sandboxes.Node, id string) sandboxes.Info {
	t.Helper()
	info, err := n.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	info.Network = &sandboxes.NetworkInfo{Internet: true, AllowOut: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}
	return info
}
