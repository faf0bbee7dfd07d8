package node

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
)

// Admission is what a node promises its sandboxes, and each team's share.
type Admission struct {
	// MemoryMB is the node's memory (0: the host's, from /proc/meminfo);
	// no sandbox may ask for more.
	MemoryMB int64
	// CPUs is the node's processors (0: runtime.NumCPU); a sandbox's CPU
	// limit is capped at them.
	CPUs int
	// MemoryOvercommit is how many times MemoryMB the memory limits of
	// the node's sandboxes may add up to (0: DefaultMemoryOvercommit).
	// Limits are ceilings, rarely reached all at once; a create past the
	// ratio is refused as the node being full.
	MemoryOvercommit float64
	// Team caps what one team's sandboxes on the node may hold together.
	Team TeamQuota
}

// DefaultMemoryOvercommit lets sandboxes' memory limits add up to four
// times the node's memory.
const DefaultMemoryOvercommit = 4

// withDefaults fills what the operator left at zero from the host.
func (a Admission) withDefaults() (Admission, error) {
	if a.MemoryMB == 0 {
		mb, err := hostMemoryMB()
		if err != nil {
			return a, err
		}
		a.MemoryMB = mb
	}
	if a.CPUs == 0 {
		a.CPUs = runtime.NumCPU()
	}
	if a.MemoryOvercommit == 0 {
		a.MemoryOvercommit = DefaultMemoryOvercommit
	}
	if a.MemoryMB < 0 || a.CPUs < 0 || a.MemoryOvercommit < 0 {
		return a, fmt.Errorf("admission: negative capacity %+v", a)
	}
	return a, nil
}

// fit caps a sandbox's CPU limit at the node's processors (a quota above
// them means nothing) and refuses memory the node does not have.
func (a Admission) fit(l isolation.Limits) (isolation.Limits, error) {
	l.CPUMillis = min(l.CPUMillis, int64(a.CPUs)*1000)
	if l.MemoryMB > a.MemoryMB {
		return l, errs.New(errs.InvalidArgument, "the sandbox asks for %d MiB of memory; this node has %d MiB", l.MemoryMB, a.MemoryMB)
	}
	return l, nil
}

// admitLocked refuses a sandbox of team with limits l when the node's
// promised memory or the team's quota (quota, else the node's) would be
// passed. The sandboxes in the table (warm ones are not there) are what is
// promised. m.mu is held.
func (m *Manager) admitLocked(team string, quota *TeamQuota, l isolation.Limits) error {
	a := m.cfg.Admission
	if quota != nil {
		a.Team = *quota
	}
	var mem int64
	var teamUse TeamQuota
	for _, sb := range m.sandboxes {
		mem += sb.limits.MemoryMB
		if team != "" && sb.team == team {
			teamUse.Sandboxes++
			teamUse.CPUs += int((sb.limits.CPUMillis + 999) / 1000)
			teamUse.MemoryMB += sb.limits.MemoryMB
			teamUse.DiskMB += sb.limits.DiskMB
		}
	}
	if limit := int64(float64(a.MemoryMB) * a.MemoryOvercommit); mem+l.MemoryMB > limit {
		return errs.Retryable(errs.New(errs.Unavailable, "node is full: its sandboxes are promised %d MiB of memory, %d MiB more would pass its limit of %d MiB (%g × %d MiB)",
			mem, l.MemoryMB, limit, a.MemoryOvercommit, a.MemoryMB), time.Second, errs.CodeCapacity)
	}
	if team == "" {
		return nil
	}
	return a.Team.Admit(teamUse, TeamQuota{Sandboxes: 1, CPUs: int((l.CPUMillis + 999) / 1000), MemoryMB: l.MemoryMB, DiskMB: l.DiskMB})
}

// checkAdmission is admitLocked taking the lock.
func (m *Manager) checkAdmission(team string, quota *TeamQuota, l isolation.Limits) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admitLocked(team, quota, l)
}

// hostMemoryMB reads MemTotal from /proc/meminfo.
func hostMemoryMB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", rest, err)
			}
			return kb >> 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

// Load is what a node may promise and what it has promised.
type Load struct {
	CPUs     int
	MemoryMB int64 // the memory its sandboxes' limits may add up to
	// CommittedCPUMillis and CommittedMemoryMB add up its sandboxes'
	// limits (warm ones aside: they are not promised to anyone yet).
	CommittedCPUMillis, CommittedMemoryMB int64
	Sandboxes                             int
	// Warm are the warm sandboxes ready, by template id.
	Warm map[string]int
	// With node networking: the networks ready in its pool and those
	// handed out (warm sandboxes' included).
	Networking                   bool
	NetworksReady, NetworksInUse int
	// Egress is what the egress proxy holds and refused (with node
	// networking).
	Egress network.FlowStats
	// DiskBytes and DiskFreeBytes are the size of the file system that
	// holds the node's directory and what is free of it (0: unknown);
	// CommittedDiskBytes what its sandboxes' writable layers may grow to.
	DiskBytes, DiskFreeBytes, CommittedDiskBytes int64
}

// Load reports the node's capacity and commitments (placement reads it).
func (m *Manager) Load() Load {
	a := m.cfg.Admission
	l := Load{CPUs: a.CPUs, MemoryMB: int64(float64(a.MemoryMB) * a.MemoryOvercommit)}
	if m.pool != nil {
		l.Warm = m.pool.ready()
	}
	if lv, ok := m.cfg.Networks.(interface{ Levels() (int, int) }); ok {
		l.Networking = true
		l.NetworksReady, l.NetworksInUse = lv.Levels()
	}
	if fs, ok := m.cfg.Networks.(interface{ FlowStats() network.FlowStats }); ok {
		l.Egress = fs.FlowStats()
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(m.cfg.Dir, &fs); err == nil {
		l.DiskBytes, l.DiskFreeBytes = int64(fs.Blocks)*fs.Bsize, int64(fs.Bavail)*fs.Bsize
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sb := range m.sandboxes {
		l.CommittedCPUMillis += sb.limits.CPUMillis
		l.CommittedMemoryMB += sb.limits.MemoryMB
		l.CommittedDiskBytes += sb.limits.WritableBytes()
		l.Sandboxes++
	}
	return l
}
