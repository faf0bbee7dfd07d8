package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
)

const unifiedMount = "/sys/fs/cgroup"

type v2 struct {
	m    *cgroup2.Manager
	path string // absolute directory
}

func v2Resources(l Limits) *cgroup2.Resources {
	r := &cgroup2.Resources{}
	if l.CPUMillis > 0 {
		period := uint64(100000)
		quota := l.CPUMillis * int64(period) / 1000
		r.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
	}
	if l.MemoryBytes > 0 {
		limit, zero := l.MemoryBytes, int64(0)
		r.Memory = &cgroup2.Memory{Max: &limit, Swap: &zero}
	}
	if l.PIDs > 0 {
		r.Pids = &cgroup2.Pids{Max: l.PIDs}
	}
	if l.IOWeight > 0 {
		r.IO = &cgroup2.IO{BFQ: cgroup2.BFQ{Weight: l.IOWeight}}
	}
	return r
}

// v2Group places name under the node's cgroup. The v2 "no internal
// processes" rule forbids enabling controllers for children of a group that
// holds processes, so on first use the node moves itself into a leaf
// "<own>/cove-node" and the sandboxes live beside it.
func v2Group(name string) (string, error) {
	own, err := cgroup2.NestedGroupPath("")
	if err != nil {
		return "", err
	}
	if own != "/" {
		if err := leaveV2Parent(own); err != nil {
			return "", err
		}
		own = filepath.Dir(own)
	}
	return filepath.Join(own, name), nil
}

// leaveV2Parent moves this process from own into a sibling leaf, unless it
// already lives in that leaf.
func leaveV2Parent(own string) error {
	if filepath.Base(own) == "cove-node" {
		return nil
	}
	leaf := filepath.Join(unifiedMount, own, "cove-node")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("move node into %s: %w", leaf, err)
	}
	return nil
}

func newV2(name string, l Limits) (*v2, error) {
	group, err := v2Group(name)
	if err != nil {
		return nil, err
	}
	res := v2Resources(l)
	if res.IO != nil && !fileExists(filepath.Join(unifiedMount, filepath.Dir(group), "io.bfq.weight")) {
		res.IO = nil
	}
	m, err := cgroup2.NewManager(unifiedMount, group, res)
	if err != nil {
		return nil, err
	}
	return &v2{m: m, path: filepath.Join(unifiedMount, group)}, nil
}

func loadV2(name string) (*v2, error) {
	group, err := v2Group(name)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(unifiedMount, group)
	if !fileExists(path) {
		return nil, os.ErrNotExist
	}
	m, err := cgroup2.Load(group)
	if err != nil {
		return nil, err
	}
	return &v2{m: m, path: path}, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (c *v2) add(pid int) error { return c.m.AddProc(uint64(pid)) }

func (c *v2) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.path, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

func (c *v2) update(l Limits) error { return c.m.Update(v2Resources(l)) }
func (c *v2) freeze() error         { return c.m.Freeze() }
func (c *v2) thaw() error           { return c.m.Thaw() }
func (c *v2) remove() error         { return os.Remove(c.path) }
func (c *v2) oomFile() string       { return filepath.Join(c.path, "memory.events") }

// stats reads the few files Stats needs (as v1's does).
func (c *v2) stats() (Stats, error) {
	usage, err := readUint(filepath.Join(c.path, "memory.current"))
	if err != nil {
		return Stats{}, err
	}
	s := Stats{MemoryUsage: usage}
	s.MemoryLimit, _ = readUint(filepath.Join(c.path, "memory.max"))
	s.MemoryCache, _ = statField(filepath.Join(c.path, "memory.stat"), "file")
	usec, _ := statField(filepath.Join(c.path, "cpu.stat"), "usage_usec")
	s.CPUUsage = time.Duration(usec) * time.Microsecond
	s.PIDs, _ = readUint(filepath.Join(c.path, "pids.current"))
	s.OOMKills, _ = readOOMKills(c.oomFile())
	return s, nil
}
