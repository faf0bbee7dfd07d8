package testkit

import (
	"errors"
	"net"
	"testing"
	"time"
)

// DialFrom opens n TCP connections to addr from the local address from
// (a loopback address other than 127.0.0.1 plays another client); they
// send nothing and close with the test.
func DialFrom(t testing.TB, from, addr string, n int) []net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	out := make([]net.Conn, 0, n)
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// StillOpen counts the connections their server has not closed: a read
// on one waits (until wait has passed) rather than ending at once.
func StillOpen(conns []net.Conn, wait time.Duration) int {
	n := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(wait))
		var b [1]byte
		_, err := c.Read(b[:])
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			n++
		}
	}
	return n
}
