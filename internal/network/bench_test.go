package network

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
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
// table and the process), a sink at the fake internet's port, and hands
// one network out; all undone when b ends.
func sandboxToSink(b *testing.B, rng, table string, port int) (*Manager, *Net) {
	m, err := New(Config{Range: netip.MustParsePrefix(rng), Table: fmt.Sprintf("%s%d", table, os.Getpid()), PoolSize: 1}, logx.Discard())
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
// through NAT alone and through the proxy, and report this process's
// descriptors and memory (heap and goroutine stacks) per connection.
func BenchmarkEgressProxy(b *testing.B) {
	testkit.NeedRoot(b, "")
	m, n := sandboxToSink(b, "198.18.248.0/24", "cove-bench-e", 443)
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
	open := func(n *Net) net.Conn {
		var c net.Conn
		inNS(b, n.NS, func() { c, err = net.Dial("tcp", testutil.InternetAddr+":443") })
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
		for b.Loop() {
			stream(b, open(n))
		}
	})
	// held: the test's own ends of each connection (the sandbox's socket,
	// the far end's and its reader) are in this process too, so the
	// proxy's share is the figure less direct's.
	for _, tc := range []struct {
		name string
		n    *Net
	}{{"held-direct", direct}, {"held-proxied", n}} {
		b.Run(tc.name, func(b *testing.B) {
			const held = 200
			for b.Loop() {
				fds0, mem0 := processCost(b)
				conns := make([]net.Conn, held)
				for i := range conns {
					conns[i] = open(tc.n)
				}
				time.Sleep(500 * time.Millisecond) // the proxy dialled each
				fds1, mem1 := processCost(b)
				for _, c := range conns {
					c.Close()
				}
				b.ReportMetric(float64(fds1-fds0)/held, "fds/conn")
				b.ReportMetric(float64(mem1-mem0)/held/1024, "KiB/conn")
				time.Sleep(500 * time.Millisecond) // closed at both ends
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
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(fds), ms.HeapInuse + ms.StackInuse
}
