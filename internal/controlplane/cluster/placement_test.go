package cluster

import (
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// TestPlacementSurvivesAHeartbeat checks that a create this replica made
// counts on its node until a heartbeat sampled after it does, never twice
// for long and never not at all.
func TestPlacementSurvivesAHeartbeat(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		placedAgo time.Duration // when this replica placed a 512 MB sandbox
		beat      store.Member  // the heartbeat read now
		sandboxes int
		freeMB    int64
	}{
		{"heartbeat older than the create: counted by the replica",
			time.Second, store.Member{MemoryMB: 4096, Age: 3 * time.Second}, 1, 3584},
		{"heartbeat just after the create: may not count it yet, kept",
			time.Second, store.Member{MemoryMB: 4096, Sandboxes: 1, CommittedMemoryMB: 512, Age: 500 * time.Millisecond}, 2, 3072},
		{"heartbeat well after the create: counted by the node only",
			5 * time.Second, store.Member{MemoryMB: 4096, Sandboxes: 1, CommittedMemoryMB: 512, Age: time.Second}, 1, 3584},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &member{placed: []placement{{now.Add(-tt.placedAgo), 512}}}
			m.report(tt.beat, now)
			if s, f := m.load(); s != tt.sandboxes || f != tt.freeMB {
				t.Errorf("load = %d sandboxes, %d MB free; want %d, %d", s, f, tt.sandboxes, tt.freeMB)
			}
		})
	}
}

// TestPlacementSpreads places creates through two replicas whose view of
// each other's creates is only the nodes' heartbeats, stale or not: every
// node gets some, and no node more than one over another.
func TestPlacementSpreads(t *testing.T) {
	for round := range 50 {
		replicas := []*Cluster{{nodes: map[string]*member{}}, {nodes: map[string]*member{}}}
		truth := map[string]int{"n1": 0, "n2": 0, "n3": 0}
		beat := func(c *Cluster, age time.Duration) { // what every node reported age ago
			for id, n := range truth {
				if c.nodes[id] == nil {
					c.nodes[id] = &member{}
				}
				c.nodes[id].report(store.Member{ID: id, MemoryMB: 4096, Sandboxes: n, Age: age}, time.Now())
			}
		}
		for _, c := range replicas {
			beat(c, 0)
		}
		for i := range 6 {
			c := replicas[i%2]
			if round%2 == 0 {
				beat(c, time.Minute) // a stale heartbeat: counts nothing placed since
			} else {
				beat(c, 0) // a fresh one
			}
			id := c.candidates("")[0].id
			c.placed(id, 512)
			truth[id]++
		}
		for id, n := range truth {
			if n != 2 && round%2 == 0 || n == 0 {
				t.Fatalf("round %d: %v (%s has %d)", round, truth, id, n)
			}
		}
	}
}
