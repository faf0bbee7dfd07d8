package network

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"

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
		m, err := New(Config{Range: netip.MustParsePrefix("198.19.247.0/24"), Table: fmt.Sprintf("cove-bench-%d", os.Getpid()), PoolSize: 1}, logx.Discard())
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		ns := testutil.FakeInternet(b)
		ln, err := testutil.ListenIn(ns, testutil.InternetAddr+":9000")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		sink(b, ln)
		n, err := m.Acquire(context.Background(), true)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Release(n)
		b.SetBytes(streamBytes)
		for b.Loop() {
			var c net.Conn
			inNS(b, n.NS, func() { c, err = net.Dial("tcp", testutil.InternetAddr+":9000") })
			if err != nil {
				b.Fatal(err)
			}
			stream(b, c)
		}
	})
}
