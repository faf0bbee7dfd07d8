package envd

import (
	"bufio"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd/envdwire"
)

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Envd-Version", envdwire.Version)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) envs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.settings.EnvVars())
}

// metrics reports what the sandbox sees of itself: CPU over a short sample,
// memory from /proc/meminfo and the root file system's usage.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	busy0, total0 := cpuTimes()
	time.Sleep(100 * time.Millisecond)
	busy1, total1 := cpuTimes()
	pct := 0.0
	if total1 > total0 {
		pct = 100 * float64(busy1-busy0) / float64(total1-total0)
	}
	mem := meminfo()
	var fs unix.Statfs_t
	_ = unix.Statfs("/", &fs)
	total, used := mem["MemTotal"], mem["MemTotal"]-mem["MemAvailable"]
	writeJSON(w, http.StatusOK, map[string]any{
		"ts":            time.Now().Unix(),
		"cpu_count":     runtime.NumCPU(),
		"cpu_used_pct":  pct,
		"mem_total":     total,
		"mem_used":      used,
		"mem_cache":     mem["Cached"],
		"mem_total_mib": total >> 20,
		"mem_used_mib":  used >> 20,
		"disk_total":    fs.Blocks * uint64(fs.Bsize),
		"disk_used":     (fs.Blocks - fs.Bfree) * uint64(fs.Bsize),
	})
}

func cpuTimes() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

func meminfo() map[string]uint64 {
	out := map[string]uint64{}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		out[k] = n << 10
	}
	return out
}
