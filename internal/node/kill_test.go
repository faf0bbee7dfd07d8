package node_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// waitDead waits until pid is gone or a zombie.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d did not die", pid)
}
