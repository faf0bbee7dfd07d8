// Package cgroups gives each sandbox a control group with CPU, memory, pids
// and (where the host offers it) io limits, on cgroup v1 and v2 hosts alike,
// through github.com/containerd/cgroups/v3. Sandbox groups nest under the
// node's own cgroup, so a node confined by its supervisor stays confined.
package cgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	cg "github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
)

// Limits are a sandbox's resource limits; zero fields are not limited.
type Limits struct {
	// CPUMillis is the CPU quota in thousandths of a core (1000 = one core).
	CPUMillis int64
	// MemoryBytes is the hard memory limit; swap is never allowed.
	MemoryBytes int64
	// PIDs is the most tasks the sandbox may hold.
	PIDs int64
	// IOWeight is the relative io weight (10–1000) where the host's io
	// scheduler supports weights.
	IOWeight uint16
}

// Stats is a cgroup's usage.
type Stats struct {
	CPUUsage    time.Duration
	MemoryUsage uint64
	MemoryLimit uint64
	MemoryCache uint64
	PIDs        uint64
	OOMKills    uint64
}

// Version is the cgroup version in use: 1 (legacy or hybrid hosts) or 2.
func Version() int {
	if cg.Mode() == cg.Unified {
		return 2
	}
	return 1
}

// Group is one sandbox's control group.
type Group struct {
	name string // path relative to the node's cgroup, e.g. "cove/<id>"
	impl impl
}

// impl is what differs between cgroup v1 and v2.
type impl interface {
	add(pid int) error
	procs() ([]int, error)
	freeze() error
	thaw() error
	remove() error
	oomFile() string // the file with the "oom_kill N" line
	stats() (Stats, error)
	update(l Limits) error
}

// New creates the group name (relative to the node's own cgroup) with limits.
func New(name string, l Limits) (*Group, error) {
	var (
		i   impl
		err error
	)
	if Version() == 2 {
		i, err = newV2(name, l)
	} else {
		i, err = newV1(name, l)
	}
	if err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", name, err)
	}
	return &Group{name: name, impl: i}, nil
}

// Load opens an existing group (after a node restart).
func Load(name string) (*Group, error) {
	var (
		i   impl
		err error
	)
	if Version() == 2 {
		i, err = loadV2(name)
	} else {
		i, err = loadV1(name)
	}
	if err != nil {
		return nil, fmt.Errorf("load cgroup %s: %w", name, err)
	}
	return &Group{name: name, impl: i}, nil
}

// Name is the group's path relative to the node's cgroup.
func (g *Group) Name() string { return g.name }

// Add moves a process into the group.
func (g *Group) Add(pid int) error {
	if err := g.impl.add(pid); err != nil {
		return fmt.Errorf("add %d to cgroup %s: %w", pid, g.name, err)
	}
	return nil
}

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) { return g.impl.procs() }

// OOMFile is the file whose "oom_kill" line counts the group's OOM kills;
// the sandbox's agent keeps it open to report OOM kills.
func (g *Group) OOMFile() string { return g.impl.oomFile() }

// OOMKills reads the group's OOM kill count.
func (g *Group) OOMKills() (uint64, error) { return readOOMKills(g.impl.oomFile()) }

// readOOMKills reads the "oom_kill" line of a group's OOM file.
func readOOMKills(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return isolation.ParseOOMKills(b), nil
}

// readUint reads a cgroup file of one number; "max" (no limit) reads as
// the largest value.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return math.MaxUint64, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

// statField reads one "key value" line of a cgroup file (memory.stat,
// cpu.stat).
func statField(path, key string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, key)
}

// Stats reads the group's usage.
func (g *Group) Stats() (Stats, error) { return g.impl.stats() }

// Update sets the group's CPU and memory limits to l's (a resize; its
// pids and io limits stay). Memory below what the group uses is refused
// by the kernel once it cannot reclaim enough (EBUSY).
func (g *Group) Update(l Limits) error {
	if err := g.impl.update(Limits{CPUMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes}); err != nil {
		return fmt.Errorf("update cgroup %s: %w", g.name, err)
	}
	return nil
}

// Freeze stops every process of the group where it is (cgroup freezer);
// it returns once they are all frozen.
func (g *Group) Freeze() error {
	if err := g.impl.freeze(); err != nil {
		return fmt.Errorf("freeze cgroup %s: %w", g.name, err)
	}
	return nil
}

// Thaw lets a frozen group's processes run again.
func (g *Group) Thaw() error {
	if err := g.impl.thaw(); err != nil {
		return fmt.Errorf("thaw cgroup %s: %w", g.name, err)
	}
	return nil
}

// Destroy kills every process in the group (frozen first, so none can fork
// away), waits until the group is empty and removes it. It is idempotent.
func (g *Group) Destroy(ctx context.Context) error {
	for {
		pids, err := g.impl.procs()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list cgroup %s: %w", g.name, err)
		}
		if len(pids) == 0 {
			break
		}
		_ = g.impl.freeze()
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		_ = g.impl.thaw()
		select {
		case <-ctx.Done():
			return fmt.Errorf("empty cgroup %s: %w", g.name, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	for {
		err := g.impl.remove()
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		// The kernel needs a moment after the last task exits.
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: %w", g.name, err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// RemoveEmpty removes the group name (a parent of sandbox groups) when it
// holds no process and no child group; otherwise it leaves it.
func RemoveEmpty(name string) {
	if g, err := Load(name); err == nil {
		_ = g.impl.remove()
	}
	for _, dir := range everyV1Dir(name) {
		_ = unix.Rmdir(dir)
	}
}

// RemoveEverywhere removes group name, and the groups below it, from every
// hierarchy of the host, the ones sandboxes do not join included: what a
// runtime that makes its own groups (runsc) leaves. The groups must be
// empty; a missing one is not an error.
func RemoveEverywhere(name string) error {
	if Version() == 2 {
		if g, err := Load(name); err == nil {
			if err := g.impl.remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	for _, dir := range everyV1Dir(name) {
		if err := rmdirTree(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
	}
	return nil
}
