package guest

import (
	"encoding/binary"
	"net"
	"strconv"
	"time"

	"github.com/covesandbox/cove/internal/pipe"
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
	defer c.Close() // again after the splice: harmless
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
	if _, err := c.Write([]byte{ForwardOK}); err != nil {
		to.Close()
		return
	}
	pipe.Splice(c, to)
}
