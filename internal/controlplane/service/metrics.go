package service

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Metric is one sample of a sandbox's resource use.
type Metric struct {
	At         time.Time
	CPUCount   int
	CPUUsedPct float64
	MemUsed    uint64
	MemTotal   uint64
	MemCache   uint64
	DiskUsed   uint64
	DiskTotal  uint64
	// EgressConnections are those the sandbox holds open through the
	// node's egress proxy (Cove's; bounded by the node's
	// --egress-max-connections).
	EgressConnections uint64
}

// history is a sandbox's kept samples, oldest first, at most cfg.MetricsKept
// (a ring: the oldest goes first), and the CPU time at the last one.
type history struct {
	samples   []Metric
	next      int // where the next sample goes once the ring is full
	lastAt    time.Time
	lastUsage time.Duration
}

func (h *history) add(m Metric, keep int) {
	if len(h.samples) < keep {
		h.samples = append(h.samples, m)
		return
	}
	h.samples[h.next] = m
	h.next = (h.next + 1) % keep
}

// between returns the samples taken from start to end (whole seconds,
// inclusive, as the API's unix-second bounds), oldest first; zero bounds
// are open.
func (h *history) between(start, end time.Time) []Metric {
	var out []Metric
	n := len(h.samples)
	for i := range n {
		m := h.samples[(h.next+i)%n]
		sec := m.At.Unix()
		if (!start.IsZero() && sec < start.Unix()) || (!end.IsZero() && sec > end.Unix()) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// RunSampler samples every running sandbox's use each MetricsInterval
// into its history, until ctx ends.
func (s *Service) RunSampler(ctx context.Context) {
	t := time.NewTicker(s.cfg.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		live := map[string]bool{}
		if b, ok := s.node.(batchSampler); ok { // one call per node
			samples := b.Sample(ctx)
			infos := make([]sandboxes.Info, len(samples))
			for i, smp := range samples {
				infos[i] = smp.Info
				if smp.Info.Team != "" { // builds have no history
					live[smp.Info.ID] = true
					s.keep(smp.Info, smp.Stats)
				}
			}
			s.teams.sample(infos, time.Now().UTC())
		} else {
			infos, err := s.node.List(ctx)
			if err != nil {
				s.log.Debug("list sandboxes to sample", logx.Err(err))
			}
			s.teams.sample(infos, time.Now().UTC())
			for _, info := range infos {
				if info.State != sandboxes.StateRunning || info.Team == "" {
					continue // builds and ending sandboxes have no history
				}
				live[info.ID] = true
				if _, err := s.sample(ctx, info); err != nil && !errs.Is(err, errs.NotFound) {
					s.log.Debug("sample sandbox metrics", logx.SandboxID(info.ID), logx.Err(err))
				}
			}
		}
		// A sample that raced a sandbox's end must not keep its history.
		s.mu.Lock()
		for id := range s.history {
			if !live[id] {
				delete(s.history, id)
			}
		}
		s.mu.Unlock()
	}
}

// sample takes one sample of a sandbox now and keeps it; CPU is averaged
// since the previous sample (or since the sandbox started).
func (s *Service) sample(ctx context.Context, info sandboxes.Info) (Metric, error) {
	st, err := s.node.Stats(ctx, info.ID)
	if errs.Is(err, errs.Unimplemented) {
		st = isolation.Stats{}
	} else if err != nil {
		return Metric{}, err
	}
	return s.keep(info, st), nil
}

// batchSampler is a node that reports all its running sandboxes' use in
// one call (a cluster: one call per node).
type batchSampler interface {
	Sample(ctx context.Context) []sandboxes.Sample
}

// keep makes a sandbox's use now a sample of its history; CPU is averaged
// since the previous sample (or since the sandbox started).
func (s *Service) keep(info sandboxes.Info, st isolation.Stats) Metric {
	now := time.Now().UTC()
	cpus := int((info.Limits.CPUMillis + 999) / 1000)
	m := Metric{At: now, CPUCount: cpus, MemUsed: st.MemoryUsage, MemTotal: st.MemoryLimit,
		MemCache: st.MemoryCache, DiskUsed: st.DiskUsed, DiskTotal: st.DiskTotal, EgressConnections: st.EgressConnections}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.history[info.ID]
	if h == nil {
		h = &history{lastAt: info.StartedAt}
		s.history[info.ID] = h
	}
	if wall := now.Sub(h.lastAt); wall > 0 && cpus > 0 {
		m.CPUUsedPct = 100 * float64(st.CPUUsage-h.lastUsage) / float64(wall) / float64(cpus)
		m.CPUUsedPct = max(0, min(100, m.CPUUsedPct))
	}
	h.lastAt, h.lastUsage = now, st.CPUUsage
	h.add(m, s.cfg.MetricsKept)
	return m
}

// Metrics returns a sandbox's kept samples taken from start to end (unix
// seconds, inclusive; zero = open), oldest first. With no bounds and no
// sample kept yet, it samples now, so a new sandbox has one.
func (s *Service) Metrics(ctx context.Context, team, id string, start, end time.Time) ([]Metric, error) {
	if _, err := s.Get(ctx, team, id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []Metric
	if h := s.history[id]; h != nil {
		out = h.between(start, end)
	}
	s.mu.Unlock()
	if len(out) == 0 && start.IsZero() && end.IsZero() {
		info, err := s.node.Get(ctx, id)
		if err != nil {
			return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
		}
		m, err := s.sample(ctx, info)
		if err != nil {
			return nil, err
		}
		out = []Metric{m}
	}
	return out, nil
}
