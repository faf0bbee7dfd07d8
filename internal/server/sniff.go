package server

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/connguard"
)

// tlsRecordHandshake is the first byte of a TLS connection (a handshake
// record); no HTTP request starts with it.
const tlsRecordHandshake = 0x16

// bothListener serves HTTP and HTTPS on one port: each connection's first
// byte, peeked at and left in the socket, says which (a TLS handshake or a
// request line). The SDKs build some URLs with https:// whatever the
// server speaks (the desktop's stream.getUrl() is
// https://6080-<id>.<domain>/vnc.html): on the plain port of the default
// mode those work too, with the local CA's certificate. A plain connection
// is handed out as it was accepted; a TLS one as a *tls.Conn, whose
// handshake http.Server completes (Request.TLS, ALPN).
//
// It accepts from a guarded listener, which admits connections within
// its caps and retries failed accepts itself: its only error is its
// closing. A connection has the guard's wait to send its first byte.
type bothListener struct {
	net.Listener
	tls   *tls.Config
	wait  time.Duration
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // why it stopped, set before done closes
}

func listenBoth(ln *connguard.Listener, tc *tls.Config, wait time.Duration) *bothListener {
	b := &bothListener{Listener: ln, tls: tc, wait: wait, conns: make(chan net.Conn), done: make(chan struct{})}
	go b.accept()
	return b
}

// accept takes connections and sorts each in a goroutine of its own, so a
// client that sends nothing holds up no other (the guard bounds how many
// wait).
func (b *bothListener) accept() {
	for {
		c, err := b.Listener.Accept()
		if err != nil {
			b.stop(err)
			return
		}
		go b.sort(c)
	}
}

func (b *bothListener) sort(c net.Conn) {
	first, err := peekByte(c, b.wait)
	if err != nil {
		c.Close()
		return
	}
	if first == tlsRecordHandshake {
		c = tls.Server(c, b.tls)
	}
	select {
	case b.conns <- c:
	case <-b.done:
		c.Close()
	}
}

// peekByte waits up to wait for c's first byte and returns it, leaving it
// to be read.
func peekByte(c net.Conn, wait time.Duration) (byte, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	var buf [1]byte
	var n int
	var perr error
	err = raw.Read(func(fd uintptr) bool {
		n, _, perr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK)
		return perr != unix.EAGAIN
	})
	switch {
	case err != nil:
		return 0, err
	case perr != nil:
		return 0, perr
	case n == 0:
		return 0, errors.New("closed before its first byte")
	}
	return buf[0], nil
}

// Accept returns the next connection, sorted.
func (b *bothListener) Accept() (net.Conn, error) {
	select {
	case c := <-b.conns:
		return c, nil
	case <-b.done:
		return nil, b.err
	}
}

// Close stops accepting; connections already handed out stay open.
func (b *bothListener) Close() error { return b.stop(net.ErrClosed) }

func (b *bothListener) stop(why error) error {
	var err error
	b.once.Do(func() {
		b.err = why
		close(b.done)
		err = b.Listener.Close()
	})
	return err
}
