package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A port a test picks for a process it starts is free when picked and
// bound by that process a moment later. In between, the kernel may give
// the same port to any outgoing connection as its local port (the suites
// open thousands), and the process then fails with "address already in
// use": a CI run failed so. The ports below are picked under the kernel's
// ephemeral range, which it never hands out by itself, and never twice in
// one test binary.

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// FreePort is a loopback TCP port free now, outside the kernel's
// ephemeral range.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// FreeAddr is 127.0.0.1:FreePort.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}

// freePorts finds n such ports.
func freePorts(n int) ([]int, error) {
	lo, hi := pickRange()
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no free loopback port in [%d, %d) after %d tries", lo, hi, tries)
		}
		p := lo + rand.IntN(hi-lo)
		if portsGiven[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// pickRange is where ports are picked: the 16384 ports under the
// ephemeral range's start (net.ipv4.ip_local_port_range), above 1024.
func pickRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				hi = v
			}
		}
	}
	return max(1025, hi-16384), max(hi, 2048)
}
