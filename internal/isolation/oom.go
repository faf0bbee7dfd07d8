package isolation

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// ParseOOMKills finds "oom_kill N" in a cgroup's memory.oom_control (v1)
// or memory.events (v2): the node reads it of a sandbox's cgroup, and the
// agent inside the sandbox of its own.
func ParseOOMKills(b []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
