package service

import (
	"context"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// TeamMetric is one sample of a team's sandboxes (E2B's TeamMetric): how
// many ran, and how many started per second since the sample before.
type TeamMetric struct {
	At                  time.Time
	ConcurrentSandboxes int
	StartRate           float64
}

// teamMetricsKept is how many samples a team keeps: four hours at the
// default interval of 5 s.
const teamMetricsKept = 2880

// teamMetrics keeps every team's samples, taken with the sandboxes'.
type teamMetrics struct {
	mu      sync.Mutex
	rings   map[string]*teamRing
	started map[string]map[string]bool // team → ids created here since the last sample
	seen    map[string]bool            // ids seen at the last sample
	last    time.Time
}

type teamRing struct {
	samples []TeamMetric
	next    int
}

func newTeamMetrics() *teamMetrics {
	return &teamMetrics{rings: map[string]*teamRing{}, started: map[string]map[string]bool{}, seen: map[string]bool{}}
}

// created counts a sandbox this process created (a short one may end
// before the next sample sees it).
func (tm *teamMetrics) created(team, id string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if tm.started[team] == nil {
		tm.started[team] = map[string]bool{}
	}
	tm.started[team][id] = true
}

// sample takes every team's sample from the sandboxes the nodes run now:
// those running count as concurrent; those not seen at the sample before
// (or created here since) as started.
func (tm *teamMetrics) sample(infos []sandboxes.Info, now time.Time) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	running := map[string]int{}
	seen := map[string]bool{}
	for _, info := range infos {
		if info.Team == "" || info.ForBuild() {
			continue
		}
		seen[info.ID] = true
		if info.State == sandboxes.StateRunning {
			running[info.Team]++
		}
		if !tm.seen[info.ID] && !tm.last.IsZero() && info.StartedAt.After(tm.last) {
			if tm.started[info.Team] == nil {
				tm.started[info.Team] = map[string]bool{}
			}
			tm.started[info.Team][info.ID] = true
		}
	}
	for _, ids := range tm.started { // created here, but seen by the sample before: counted there
		for id := range ids {
			if tm.seen[id] {
				delete(ids, id)
			}
		}
	}
	wall := now.Sub(tm.last).Seconds()
	for team := range running {
		if tm.rings[team] == nil {
			tm.rings[team] = &teamRing{}
		}
	}
	for team := range tm.started {
		if tm.rings[team] == nil {
			tm.rings[team] = &teamRing{}
		}
	}
	for team, r := range tm.rings {
		m := TeamMetric{At: now, ConcurrentSandboxes: running[team]}
		if wall > 0 && !tm.last.IsZero() {
			m.StartRate = float64(len(tm.started[team])) / wall
		}
		r.add(m)
	}
	tm.seen, tm.last, tm.started = seen, now, map[string]map[string]bool{}
}

func (r *teamRing) add(m TeamMetric) {
	if len(r.samples) < teamMetricsKept {
		r.samples = append(r.samples, m)
		return
	}
	r.samples[r.next] = m
	r.next = (r.next + 1) % teamMetricsKept
}

// between is a team's samples from start to end (unix seconds, inclusive;
// zero = open), oldest first.
func (tm *teamMetrics) between(team string, start, end time.Time) []TeamMetric {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	r := tm.rings[team]
	if r == nil {
		return nil
	}
	var out []TeamMetric
	n := len(r.samples)
	for i := range n {
		m := r.samples[(r.next+i)%n]
		sec := m.At.Unix()
		if (!start.IsZero() && sec < start.Unix()) || (!end.IsZero() && sec > end.Unix()) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// TeamMetrics returns a team's samples from start to end (unix seconds,
// inclusive; zero = open), oldest first: the caller's own team only.
func (s *Service) TeamMetrics(ctx context.Context, caller, teamID string, start, end time.Time) ([]TeamMetric, error) {
	if teamID != caller {
		return nil, errs.New(errs.NotFound, "team %s not found", teamID)
	}
	if !start.IsZero() && !end.IsZero() && end.Before(start) {
		return nil, errs.New(errs.InvalidArgument, "end is before start")
	}
	return s.teams.between(teamID, start, end), nil
}
