package node_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil/testkit"
)

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// waitDead waits until pid is gone or a zombie.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, func() error {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return nil
		}
		return fmt.Errorf("process %d did not die", pid)
	})
}
