package guest

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// ForwardPort is where a guest's init takes connections for the guest's
// loopback: the host writes the port (two bytes, big-endian), reads one
// byte (ForwardOK, or ForwardRefused when nothing listens there) and the
// connection is then the port's. A server a sandbox runs on 127.0.0.1 is
// reachable from the node as in a container's namespace.
const ForwardPort = 49982

// Answers of the forwarder.
const (
	ForwardOK      byte = 0
	ForwardRefused byte = 1
)

// serveForwards forwards connections to addr's ForwardPort to the
// guest's loopback until the listener fails.
func serveForwards(addr string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(ForwardPort)))
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(c)
		}
	}()
	return nil
}

func forward(c net.Conn) {
	defer c.Close()
	var port uint16
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := binary.Read(c, binary.BigEndian, &port); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	to, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 10*time.Second)
	if err != nil {
		c.Write([]byte{ForwardRefused})
		return
	}
	defer to.Close()
	if _, err := c.Write([]byte{ForwardOK}); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	for _, p := range [][2]net.Conn{{to, c}, {c, to}} {
		go func() {
			defer wg.Done()
			io.Copy(p[0], p[1])
			if tc, ok := p[0].(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		}()
	}
	wg.Wait()
}
