package node

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// meter counts usage from the records the node writes: every change of a
// sandbox's state goes through writeRecord (and its end through
// removeRecord), so a sandbox runs from the record that says so to the
// next that does not. Counts start at zero with the process.
type meter struct {
	mu   sync.Mutex
	live map[string]liveRun
	done map[usageKey]*Usage
}

type usageKey struct{ team, template string }

type liveRun struct {
	key      usageKey
	since    time.Time
	cpus     float64
	memoryGB float64
}

func newMeter() *meter {
	return &meter{live: map[string]liveRun{}, done: map[usageKey]*Usage{}}
}

// observe takes a sandbox's record as written.
func (u *meter) observe(info Info, now time.Time) {
	running := info.State == StateRunning && info.Team != "" && !info.ForBuild()
	u.mu.Lock()
	defer u.mu.Unlock()
	run, was := u.live[info.ID]
	switch {
	case running && !was:
		u.live[info.ID] = liveRun{key: usageKey{info.Team, info.TemplateID}, since: now,
			cpus: float64(info.Limits.CPUMillis) / 1000, memoryGB: float64(info.Limits.MemoryMB) / 1024}
	case !running && was:
		u.closeLocked(info.ID, run, now)
	}
}

// end takes a sandbox's end (its record removed).
func (u *meter) end(id string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if run, ok := u.live[id]; ok {
		u.closeLocked(id, run, now)
	}
}

func (u *meter) closeLocked(id string, run liveRun, now time.Time) {
	delete(u.live, id)
	acc := u.done[run.key]
	if acc == nil {
		acc = &Usage{Team: run.key.team, Template: run.key.template}
		u.done[run.key] = acc
	}
	run.addTo(acc, now)
}

func (r liveRun) addTo(acc *Usage, now time.Time) {
	s := now.Sub(r.since).Seconds()
	acc.Seconds += s
	acc.CPUSeconds += s * r.cpus
	acc.MemoryGiBSeconds += s * r.memoryGB
}

// usage is every team's and template's usage until now, running
// sandboxes' included, by team then template.
func (u *meter) usage(now time.Time) []Usage {
	u.mu.Lock()
	defer u.mu.Unlock()
	all := map[usageKey]*Usage{}
	for k, acc := range u.done {
		c := *acc
		all[k] = &c
	}
	for _, run := range u.live {
		acc := all[run.key]
		if acc == nil {
			acc = &Usage{Team: run.key.team, Template: run.key.template}
			all[run.key] = acc
		}
		run.addTo(acc, now)
	}
	out := make([]Usage, 0, len(all))
	for _, acc := range all {
		out = append(out, *acc)
	}
	slices.SortFunc(out, func(a, b Usage) int {
		return strings.Compare(a.Team+"\x00"+a.Template, b.Team+"\x00"+b.Template)
	})
	return out
}

// Usage is what each team's sandboxes held while they ran on this node,
// by team and template, since the node started.
func (m *Manager) Usage() []Usage { return m.usage.usage(time.Now()) }
