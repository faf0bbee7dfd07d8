package pipe

import (
	"io"
	"net"
	"testing"
)

// TestSplice: bytes cross both ways, a half close reaches the far end and
// the other direction still flows, and both connections end closed.
func TestSplice(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (net.Conn, net.Conn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	client, a := pair()
	b, server := pair()
	done := make(chan struct{})
	go func() { Splice(a, b); close(done) }()

	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	client.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(server) // ends at the client's half close
	if err != nil || string(got) != "ping" {
		t.Fatalf("server read %q %v", got, err)
	}
	if _, err := server.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	server.Close()
	if got, err := io.ReadAll(client); err != nil || string(got) != "pong" {
		t.Fatalf("client read %q %v", got, err)
	}
	<-done
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("a is open after the splice")
	}
	client.Close()
}
