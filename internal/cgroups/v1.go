package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Subsystems are the hierarchies a sandbox joins on a v1 host. Each one
// costs a task migration (an RCU grace period, 1–3 ms measured here), so
// only what limits, measures or pauses the sandbox: freezer (pause in
// place) and blkio only where the io scheduler offers weights. cpuset (with every CPU of its parent)
// is there for lxcfs, which finds a process's CPUs by its cpuset group
// and reads the CPU quota at that same path: in the root cpuset, a
// sandbox's /proc/cpuinfo and /proc/stat would list the host's CPUs.
var v1Subsystems = map[cgroup1.Name]bool{
	cgroup1.Memory: true, cgroup1.Cpu: true, cgroup1.Cpuacct: true, cgroup1.Pids: true, cgroup1.Cpuset: true,
	cgroup1.Freezer: true,
}

// v1Mounts caches the host's v1 hierarchies: parsing mountinfo for every
// sandbox showed in profiles.
var v1Mounts = sync.OnceValues(func() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	blkio := false
	for _, s := range all {
		if p, ok := s.(interface{ Path(string) string }); ok && s.Name() == cgroup1.Blkio {
			blkio = fileExists(filepath.Join(p.Path("/"), "blkio.weight"))
		}
	}
	var out []cgroup1.Subsystem
	for _, s := range all {
		if v1Subsystems[s.Name()] || (s.Name() == cgroup1.Blkio && blkio) {
			out = append(out, s)
		}
	}
	return out, nil
})

func v1Hierarchy() ([]cgroup1.Subsystem, error) { return v1Mounts() }

// ownGroups caches the node's own group in each hierarchy (subsystem →
// path): it does not change while the node runs, and finding it parses
// /proc/self/cgroup and mountinfo (a fifth of the server's CPU under a
// stream of creates before this cache).
var ownGroups sync.Map

// nestedPath is cgroup1.NestedPath(name) over ownGroups.
func nestedPath(name string) cgroup1.Path {
	return func(sub cgroup1.Name) (string, error) {
		if base, ok := ownGroups.Load(sub); ok {
			return filepath.Join(base.(string), name), nil
		}
		base, err := cgroup1.NestedPath("")(sub)
		if err != nil {
			return "", err
		}
		ownGroups.Store(sub, base)
		return filepath.Join(base, name), nil
	}
}

type v1 struct {
	cg   cgroup1.Cgroup
	name string
	mem  string // the group's directory in the memory hierarchy
}

// dir is the group's directory in one hierarchy ("" if the host lacks it).
func (c *v1) dir(subsystem cgroup1.Name) string { return v1Dir(subsystem, c.name) }

func v1Resources(l Limits) *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.CPUMillis > 0 {
		period := uint64(100000)
		quota := l.CPUMillis * int64(period) / 1000
		r.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if l.MemoryBytes > 0 {
		limit := l.MemoryBytes
		swappiness := uint64(0)
		// cgroup v1 charges a group's TCP buffers only once its TCP limit
		// is set; unset, a sandbox could hold gigabytes of the host's TCP
		// memory outside its limit (cgroup v2 charges socket memory to
		// memory.max on its own).
		tcp := TCPBytes(limit)
		r.Memory = &specs.LinuxMemory{Limit: &limit, Swappiness: &swappiness, KernelTCP: &tcp}
		if memswAvailable() {
			swap := limit // memory+swap = memory: no swap
			r.Memory.Swap = &swap
		}
	}
	if l.PIDs > 0 {
		pids := l.PIDs
		r.Pids = &specs.LinuxPids{Limit: &pids}
	}
	if l.IOWeight > 0 && blkioWeightAvailable() {
		w := l.IOWeight
		r.BlockIO = &specs.LinuxBlockIO{Weight: &w}
	}
	return r
}

// TCPBytes is how much TCP buffer memory a group whose memory limit is
// memory may hold: a quarter of it, at least 16 MiB.
func TCPBytes(memory int64) int64 { return max(memory/4, 16<<20) }

func newV1(name string, l Limits) (*v1, error) {
	c, err := cgroup1.New(nestedPath(name), v1Resources(l), cgroup1.WithHierarchy(v1Hierarchy))
	if err != nil {
		return nil, err
	}
	return &v1{cg: c, name: name, mem: v1MemoryDir(name)}, nil
}

func loadV1(name string) (*v1, error) {
	c, err := cgroup1.Load(nestedPath(name), cgroup1.WithHierarchy(v1Hierarchy))
	if err != nil {
		return nil, err
	}
	return &v1{cg: c, name: name, mem: v1MemoryDir(name)}, nil
}

// v1Dir is name's directory in subsystem's hierarchy, nested under the
// node's own group there ("" when the host lacks the hierarchy).
func v1Dir(subsystem cgroup1.Name, name string) string {
	subs, err := v1Mounts()
	if err != nil {
		return ""
	}
	for _, s := range subs {
		p, ok := s.(interface{ Path(string) string })
		if s.Name() != subsystem || !ok {
			continue
		}
		if name == "" {
			return p.Path("/")
		}
		group, err := nestedPath(name)(subsystem)
		if err != nil {
			return ""
		}
		return p.Path(group)
	}
	return ""
}

func v1MemoryDir(name string) string { return v1Dir(cgroup1.Memory, name) }

var memswAvailable = sync.OnceValue(func() bool {
	return fileExists(filepath.Join(v1Dir(cgroup1.Memory, ""), "memory.memsw.limit_in_bytes"))
})

func blkioWeightAvailable() bool {
	return v1Dir(cgroup1.Blkio, "") != "" && fileExists(filepath.Join(v1Dir(cgroup1.Blkio, ""), "blkio.weight"))
}

func (c *v1) add(pid int) error { return c.cg.Add(cgroup1.Process{Pid: pid}) }

// procs lists the processes in the group's pids directory and below. Its
// own walk: containerd's stats every file of the tree (and Delete does so
// in each hierarchy), which was a tenth of the node's CPU under a stream of
// kills.
func (c *v1) procs() ([]int, error) {
	dir := c.dir(cgroup1.Pids)
	if dir == "" {
		return nil, errors.New("no pids hierarchy")
	}
	var out []int
	var walk func(dir string) error
	walk = func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() {
				if err := walk(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(dir)
}

// update sets the CPU quota through the library and the memory limits by
// hand: the library orders memory.memsw.limit_in_bytes after
// memory.limit_in_bytes, which the kernel refuses (EINVAL) when the limit
// grows past memsw's; growing, memsw goes first, shrinking, last.
func (c *v1) update(l Limits) error {
	r := v1Resources(l)
	mem := r.Memory
	r.Memory = nil
	if err := c.cg.Update(r); err != nil {
		return err
	}
	if mem == nil {
		return nil
	}
	cur, err := readUint(filepath.Join(c.mem, "memory.limit_in_bytes"))
	if err != nil {
		return err
	}
	files := []struct {
		name string
		v    *int64
	}{{"memory.limit_in_bytes", mem.Limit}, {"memory.memsw.limit_in_bytes", mem.Swap}, {"memory.kmem.tcp.limit_in_bytes", mem.KernelTCP}}
	if uint64(*mem.Limit) > cur {
		files[0], files[1] = files[1], files[0]
	}
	for _, f := range files {
		if f.v == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(c.mem, f.name), []byte(strconv.FormatInt(*f.v, 10)), 0); err != nil {
			return err
		}
	}
	return nil
}

// freeze and thaw use the freezer hierarchy; a group made before it
// joined one (an adopted sandbox of an older node) cannot be frozen.
func (c *v1) freeze() error { return c.cg.Freeze() }
func (c *v1) thaw() error   { return c.cg.Thaw() }

// remove removes the group's directory, children first, from every
// hierarchy it joined; the kernel refuses (EBUSY) while a process is in it.
func (c *v1) remove() error {
	subs, err := v1Mounts()
	if err != nil {
		return err
	}
	gone := 0
	for _, s := range subs {
		dir := c.dir(s.Name())
		if dir == "" {
			continue
		}
		if err := rmdirTree(dir); errors.Is(err, os.ErrNotExist) {
			gone++
		} else if err != nil {
			return err
		}
	}
	if gone == len(subs) {
		return os.ErrNotExist
	}
	return nil
}

// rmdirTree removes an empty cgroup directory and the groups below it.
// A cgroup directory holds only the kernel's files, which rmdir takes with
// it: nothing here removes a file.
func rmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return unix.Rmdir(dir)
}

func (c *v1) oomFile() string { return filepath.Join(c.mem, "memory.oom_control") }

// stats reads the few files Stats needs (containerd's Stat reads every
// file of every hierarchy, some thirty: a sample at each create showed in
// profiles). A file the host lacks reads as 0; a group that is gone is an
// error.
func (c *v1) stats() (Stats, error) {
	usage, err := readUint(filepath.Join(c.mem, "memory.usage_in_bytes"))
	if err != nil {
		return Stats{}, err
	}
	s := Stats{MemoryUsage: usage}
	s.MemoryLimit, _ = readUint(filepath.Join(c.mem, "memory.limit_in_bytes"))
	s.MemoryCache, _ = statField(filepath.Join(c.mem, "memory.stat"), "cache")
	cpu, _ := readUint(filepath.Join(c.dir(cgroup1.Cpuacct), "cpuacct.usage"))
	s.CPUUsage = time.Duration(cpu)
	s.PIDs, _ = readUint(filepath.Join(c.dir(cgroup1.Pids), "pids.current"))
	s.OOMKills, _ = readOOMKills(c.oomFile())
	return s, nil
}

// everyV1Dir is name's directory, nested under the node's own group, in
// every v1 hierarchy mounted on this host, the ones sandboxes do not join
// included (a runtime such as runsc makes groups in all of them).
func everyV1Dir(name string) []string {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3) // id:controllers:path
		if len(parts) != 3 || parts[1] == "" {
			continue // the v2 hierarchy of a hybrid host
		}
		for _, m := range strings.Split(string(mounts), "\n") {
			pre, post, ok := strings.Cut(m, " - ")
			f, g := strings.Fields(pre), strings.Fields(post)
			if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || !hasAll(g[2], parts[1]) {
				continue
			}
			// The mount's root (f[3]) is where in the hierarchy it starts.
			rel, err := filepath.Rel(f[3], parts[2])
			if err == nil && !strings.HasPrefix(rel, "..") {
				out = append(out, filepath.Join(f[4], rel, name))
			}
			break
		}
	}
	return out
}

// hasAll reports whether a mount's super options hold every controller of
// a /proc/self/cgroup entry ("cpu,cpuacct", "name=systemd").
func hasAll(options, controllers string) bool {
	opts := map[string]bool{}
	for _, o := range strings.Split(options, ",") {
		opts[o] = true
	}
	for _, c := range strings.Split(controllers, ",") {
		if !opts[c] {
			return false
		}
	}
	return true
}
