// Command peers times the same command, `/bin/echo hi`, started by Cove's
// peers on this machine over the same root file system (the host's /usr,
// read-only, as Cove's base template has it): Go's os/exec (the process
// floor), `unshare` + exec (the kernel floor), bwrap, `runc run` and
// `crun run`. It prints `go test -bench` lines; a peer that cannot run
// here prints why instead.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/fsutil"
)

func main() {
	n := flag.Int("n", 30, "starts per peer")
	runsc := flag.String("runsc", "bin/runsc", "gVisor's runsc, for the `runsc do` peer")
	flag.Parse()
	runscRoot, err := os.MkdirTemp("", "cove-peer-runsc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	defer fsutil.RemoveTree(runscRoot)
	bundle, err := makeBundle()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	defer fsutil.RemoveTree(bundle) // refuses if a mount were left under it
	peers := []struct {
		name string
		argv func(i int) []string
	}{
		{"os-exec", func(int) []string { return []string{"/bin/echo", "hi"} }},
		{"unshare-exec", func(int) []string {
			return []string{"unshare", "--fork", "--pid", "--mount", "--uts", "--ipc", "--net", "--mount-proc", "/bin/echo", "hi"}
		}},
		{"bwrap", func(int) []string {
			return []string{"bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
				"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/echo", "hi"}
		}},
		{"runc", func(i int) []string {
			return []string{"runc", "run", "--bundle", bundle, fmt.Sprintf("cove-peer-%d-%d", os.Getpid(), i)}
		}},
		{"crun", func(i int) []string {
			return []string{"crun", "run", "--bundle", bundle, fmt.Sprintf("cove-peer-c-%d-%d", os.Getpid(), i)}
		}},
		// gVisor alone, over the host's root; never its default network,
		// which changes the host's forwarding and firewall.
		{"runsc-do", func(int) []string {
			return []string{*runsc, "--root", runscRoot, "--network=none", "--platform=systrap", "do", "/bin/echo", "hi"}
		}},
	}
	for _, p := range peers {
		var xs []time.Duration
		var failure string
		for i := range *n {
			argv := p.argv(i)
			cmd := exec.Command(argv[0], argv[1:]...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			if err != nil || !strings.Contains(out.String(), "hi") {
				failure = strings.TrimSpace(firstLine(out.String()) + " " + fmt.Sprint(err))
				break
			}
			xs = append(xs, took)
		}
		if failure != "" {
			fmt.Printf("# peer %s cannot run here: %s\n", p.name, failure)
			continue
		}
		slices.Sort(xs)
		at := func(q float64) float64 { return float64(xs[int(q*float64(len(xs)-1))]) / float64(time.Millisecond) }
		fmt.Printf("BenchmarkPeer/%s %d 0 ns/op %.2f p50-ms %.2f p95-ms %.2f p99-ms\n", p.name, len(xs), at(0.5), at(0.95), at(0.99))
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// makeBundle writes an OCI bundle whose root has the host's /usr bound
// read-only (and the merged-/usr links), running /bin/echo hi.
func makeBundle() (string, error) {
	dir, err := os.MkdirTemp("", "cove-peer-bundle-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"usr", "proc", "dev", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			return "", err
		}
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false, "user": map[string]int{"uid": 0, "gid": 0}, "args": []string{"/bin/echo", "hi"},
			"env": []string{"PATH=/usr/bin:/bin"}, "cwd": "/", "noNewPrivileges": true,
		},
		"root":     map[string]any{"path": "rootfs", "readonly": true},
		"hostname": "peer",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev"}},
			{"destination": "/usr", "type": "bind", "source": "/usr", "options": []string{"rbind", "ro", "nosuid", "nodev"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]string{{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}},
			"resources":  map[string]any{"memory": map[string]int64{"limit": 256 << 20}, "pids": map[string]int64{"limit": 256}},
		},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644)
}
