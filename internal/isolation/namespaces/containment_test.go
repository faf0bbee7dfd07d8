package namespaces

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
)

// TestContainment runs the suite's containment cases, and this driver's
// own, in a sandbox started from each binary (their fork paths differ),
// and as cove server starts them: in a user namespace of their own.
func TestContainment(t *testing.T) {
	for name, bin := range binaries() {
		t.Run(name, func(t *testing.T) { testContainment(t, bin, false) })
	}
	t.Run("userns", func(t *testing.T) {
		bin := binaries()["sandbox-binary"]
		if bin == "" {
			bin = binaries()["release-binary"]
		}
		testContainment(t, bin, true)
	})
}

func testContainment(t *testing.T, binary string, userns bool) {
	e := testEnv(t)
	d := e.driverWith(t, binary)
	d.cfg.UserNamespaces = userns
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	if _, err := d.Create(ctx, id, e.spec()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Destroy(context.Background(), id); err != nil {
			t.Error(err)
		}
	}()
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
	defer c.Close()

	cases := append(isolationtest.ContainmentCases(id, isolationtest.HostSecret(t)),
		// What this driver shows of the host kernel's own mechanisms.
		isolationtest.Containment{Name: "has a minimal /dev", User: "root", Cmd: "ls /dev | tr '\\n' ' '", Want: "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"},
		isolationtest.Containment{Name: "root has only the small capability set", User: "root", Cmd: "grep -E 'CapEff|CapBnd' /proc/self/status", Want: "CapEff:\t00000000200005fb\nCapBnd:\t00000000200005fb"},
		// PR_GET_SECUREBITS (27): none carried over from the thread that
		// cloned the init as the namespace's owner.
		isolationtest.Containment{Name: "no securebits are set", User: "root", Cmd: "python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))'", Want: "0"},
		isolationtest.Containment{Name: "seccomp filters every process", User: "user", Cmd: "grep Seccomp: /proc/self/status", Want: "Seccomp:\t2"},
		isolationtest.Containment{Name: "its cgroup namespace is rooted at its own cgroup", User: "root", Cmd: "cut -d: -f3 /proc/self/cgroup | sort -u | tr '\\n' ' '", Want: "/ "},
	)
	isolationtest.CheckContainment(t, c, cases)
}
