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
			m := &member{placed: []placement{{now.Add(-tt.placedAgo), 512, ""}}}
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
			id := c.candidates("", "")[0].id
			c.placed(id, 512, "")
			truth[id]++
		}
		for id, n := range truth {
			if n != 2 && round%2 == 0 || n == 0 {
				t.Fatalf("round %d: %v (%s has %d)", round, truth, id, n)
			}
		}
	}
}

// TestPlacementPrefersTemplates: a create goes to a node with a warm
// sandbox of its template, or its layers, unless that node runs more
// than the bonus over the least loaded; a warm sandbox this replica took
// already draws no more.
func TestPlacementPrefersTemplates(t *testing.T) {
	tests := []struct {
		name     string
		template string
		n1, n2   store.Member
		taken    int // creates of the template this replica placed on n1 since its heartbeat
		want     string
	}{
		{"a warm sandbox on the busier node", "t", store.Member{Sandboxes: 2, Warm: map[string]int{"t": 1}}, store.Member{Sandboxes: 1}, 0, "n1"},
		{"a warm sandbox on a node far busier", "t", store.Member{Sandboxes: 4, Warm: map[string]int{"t": 1}}, store.Member{Sandboxes: 1}, 0, "n2"},
		{"the layers on the node as loaded", "t", store.Member{Sandboxes: 1, Cached: []string{"t"}}, store.Member{Sandboxes: 1}, 0, "n1"},
		{"the layers on a node two sandboxes busier", "t", store.Member{Sandboxes: 3, Cached: []string{"t"}}, store.Member{Sandboxes: 1}, 0, "n2"},
		{"its warm sandbox taken by this replica", "t", store.Member{Sandboxes: 1, Warm: map[string]int{"t": 1}}, store.Member{Sandboxes: 1}, 1, "n2"},
		{"another template's warm sandbox", "u", store.Member{Sandboxes: 2, Warm: map[string]int{"t": 1}}, store.Member{Sandboxes: 1}, 0, "n2"},
		{"no template named", "", store.Member{Sandboxes: 2, Warm: map[string]int{"t": 1}, Cached: []string{"t"}}, store.Member{Sandboxes: 1}, 0, "n2"},
		{"as loaded, the more CPU free", "", store.Member{Sandboxes: 1, CPUs: 8, CommittedCPUMillis: 7000}, store.Member{Sandboxes: 1, CPUs: 8, CommittedCPUMillis: 1000}, 0, "n2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // ties are broken at random: none here
				c := &Cluster{nodes: map[string]*member{}}
				for id, m := range map[string]store.Member{"n1": tt.n1, "n2": tt.n2} {
					m.ID, m.MemoryMB = id, 4096
					c.nodes[id] = &member{}
					c.nodes[id].report(m, time.Now())
				}
				for range tt.taken {
					c.placed("n1", 0, tt.template)
				}
				if got := c.candidates("", tt.template)[0].id; got != tt.want {
					t.Fatalf("placed on %s, want %s", got, tt.want)
				}
			}
		})
	}
}
