package testutil

import (
	"os"
	"path/filepath"
	"strings"
)

// CgroupsUnder lists the groups under the cgroup parent a test gave a
// server, a node or a driver (--cgroup-parent), in each hierarchy a
// sandbox uses (v1), or in the unified one (v2): nested, as the processes
// the test starts are, under this process's own group.
func CgroupsUnder(parent string) []string {
	var out []string
	for _, h := range []string{"memory", "pids", "cpu", "freezer"} {
		dir := groupDir(h, parent)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, en := range entries {
			if en.IsDir() {
				out = append(out, h+"/"+en.Name())
			}
		}
		if strings.HasPrefix(dir, "/sys/fs/cgroup/"+h+"/") {
			continue
		}
		break // the unified hierarchy: one look is all
	}
	return out
}

// groupDir is the directory of the cgroup parent in a v1 hierarchy (or
// under the unified mount on v2), nested under this process's own group.
func groupDir(hierarchy, parent string) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == hierarchy {
				return filepath.Join("/sys/fs/cgroup", hierarchy, parts[2], parent)
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", filepath.Dir(parts[2]), parent)
			}
		}
	}
	return ""
}

// MountsUnder lists the mount points at or under dir.
func MountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if p := f[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}
