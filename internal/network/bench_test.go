package network

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
)

const streamBytes = 256 << 20

// sink accepts one connection at a time and discards what it reads.
func sink(b *testing.B, ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
}

// stream sends streamBytes over conn.
func stream(b *testing.B, conn net.Conn) {
	buf := make([]byte, 256<<10)
	for sent := 0; sent < streamBytes; sent += len(buf) {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
}

// BenchmarkTCPStream compares one TCP stream over the host's loopback with
// one from a sandbox network through NAT to a fake internet host.
func BenchmarkTCPStream(b *testing.B) {
	testkit.NeedRoot(b, "")
	b.Run("host-loopback", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		sink(b, ln)
		b.SetBytes(streamBytes)
		for b.Loop() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			stream(b, c)
		}
	})
	// The same hop without Cove: the host itself to the fake internet over
	// one veth, no NAT, no firewall. Sandbox links and the test's fake
	// internet use a 64 KiB MTU like loopback, so the far end is not the
	// narrow link and the figures show what the path itself costs.
	b.Run("host-veth", func(b *testing.B) {
		ns := testutil.FakeInternet(b)
		ln, err := testutil.ListenIn(ns, testutil.InternetAddr+":9001")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		sink(b, ln)
		b.SetBytes(streamBytes)
		for b.Loop() {
			c, err := net.Dial("tcp", testutil.InternetAddr+":9001")
			if err != nil {
				b.Fatal(err)
			}
			stream(b, c)
		}
	})
	b.Run("sandbox-nat", func(b *testing.B) {
		_, n := sandboxToSink(b, "198.19.247.0/24", "cove-bench-", 9000)
		b.SetBytes(streamBytes)
		for b.Loop() {
			var c net.Conn
			var err error
			inNS(b, n.NS, func() { c, err = net.Dial("tcp", testutil.InternetAddr+":9000") })
			if err != nil {
				b.Fatal(err)
			}
			stream(b, c)
		}
	})
}

// sandboxToSink makes a node's networks over rng (their table named by
// table and the process; the egress proxy's names resolved at names, if
// given), a sink at the fake internet's port, and hands one network out;
// all undone when b ends.
func sandboxToSink(b *testing.B, rng, table string, port int, names ...netip.AddrPort) (*Manager, *Net) {
	m, err := New(Config{Range: netip.MustParsePrefix(rng), Table: fmt.Sprintf("%s%d", table, os.Getpid()), PoolSize: 1, NameServers: names}, logx.Discard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	ns := testutil.FakeInternet(b)
	ln, err := testutil.ListenIn(ns, fmt.Sprintf("%s:%d", testutil.InternetAddr, port))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	sink(b, ln)
	n, err := m.Acquire(context.Background(), true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Release(n) })
	return m, n
}

// BenchmarkEgressProxy measures what a connection through the egress
// proxy costs: "stream" is one TCP stream by an allowed name (its MB/s
// beside TCPStream's NAT figure); "held-*" hold 200 connections open,
// through NAT alone, through the proxy allowed by address (copied as they
// are) and allowed by a name alone (plain HTTP: each request checked, a
// request answered and the connection kept alive), and report this
// process's descriptors, memory (heap and goroutine stacks) and resident
// memory per connection, and the descriptors still open half a second
// after they were all closed (without a collection: what a pool keeps).
// Run held-* with -benchtime 1x, one process each: Go's pools outlive a
// run.
func BenchmarkEgressProxy(b *testing.B) {
	testkit.NeedRoot(b, "")
	dns := testutil.ServeDNS(b)
	dns.Set("bench.test", 60, testutil.InternetAddr)
	m, n := sandboxToSink(b, "198.18.248.0/24", "cove-bench-e", 443, dns.Addr)
	// Proxied (a domain rule), allowed by address (no denyOut): what every
	// version of the proxy lets through alike.
	err := m.SetDomains(n, []string{"bench.test"})
	if err != nil {
		b.Fatal(err)
	}
	direct, err := m.Acquire(context.Background(), true) // NAT only: the floor
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release(direct)
	byName, err := m.Acquire(context.Background(), true) // all else denied
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release(byName)
	if err := m.SetRules(byName, nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}); err != nil {
		b.Fatal(err)
	}
	if err := m.SetDomains(byName, []string{"bench.test"}); err != nil {
		b.Fatal(err)
	}
	open := func(n *Net, port int) net.Conn {
		var c net.Conn
		inNS(b, n.NS, func() { c, err = net.Dial("tcp", net.JoinHostPort(testutil.InternetAddr, strconv.Itoa(port))) })
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: bench.test\r\n\r\n"); err != nil {
			b.Fatal(err)
		}
		return c
	}
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(streamBytes)
		cpu0 := cpuTime(b)
		for b.Loop() {
			stream(b, open(n, 443))
		}
		b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N)/(float64(streamBytes)/(1<<30)), "cpu-ms/GiB")
	})
	// held: the test's own ends of each connection (the sandbox's socket,
	// the far end's and its reader) are in this process too, so the
	// proxy's share is the figure less direct's.
	for _, tc := range []struct {
		name string
		n    *Net
		port int // 80: the fake internet's web server answers
	}{{"held-direct", direct, 443}, {"held-proxied", n, 443}, {"held-direct-web", direct, 80}, {"held-byname", byName, 80}} {
		b.Run(tc.name, func(b *testing.B) {
			const held = 200
			for b.Loop() {
				fds0, mem0 := processCost(b)
				rss0 := residentKiB(b)
				conns := make([]net.Conn, held)
				for i := range conns {
					conns[i] = open(tc.n, tc.port)
				}
				time.Sleep(500 * time.Millisecond) // the proxy dialled each
				fds1, mem1 := processCost(b)
				rss1 := residentKiB(b)
				for _, c := range conns {
					c.Close()
				}
				time.Sleep(500 * time.Millisecond) // closed at both ends
				fds2 := openFDs(b)
				b.ReportMetric(float64(fds1-fds0)/held, "fds/conn")
				b.ReportMetric(float64(mem1-mem0)/held/1024, "KiB/conn")
				b.ReportMetric(float64(rss1-rss0)/held, "RSS-KiB/conn")
				b.ReportMetric(float64(fds2-fds0)/held, "fds-left/conn")
			}
		})
	}
}

// processCost is this process's open descriptors and the memory Go holds
// for it in use (heap and stacks), after a collection.
func processCost(b *testing.B) (int, uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return openFDs(b), ms.HeapInuse + ms.StackInuse
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFDs is how many descriptors this process has open.
func openFDs(b *testing.B) int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(fds)
}

// residentKiB is this process's resident memory (VmRSS).
func residentKiB(b *testing.B) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return kib
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
