package guest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// serveControl serves ControlPort on addr for the node: exports of the
// writable layer upper (the overlay's upper directory) of the sandbox in
// cgroup, frozen for the copy, one at a time; and the clock.
func serveControl(addr, upper, cgroup string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(ControlPort)))
	if err != nil {
		return err
	}
	var exports sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Only the node: its address is on the tap's far end, which
			// a sandbox (no CAP_NET_ADMIN or CAP_NET_RAW) cannot take.
			if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || a.IP.String() != NodeAddr {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				var req [1]byte
				if _, err := io.ReadFull(c, req[:]); err != nil {
					return
				}
				c.SetReadDeadline(time.Time{})
				switch req[0] {
				case RequestExport:
					exports.Lock()
					defer exports.Unlock()
					export(c, upper, cgroup)
				case RequestClock:
					writeOutcome(c, setClock(c))
				default:
					writeOutcome(c, fmt.Errorf("no request %q", req[0]))
				}
			}()
		}
	}()
	return nil
}

// setClock sets the guest's clock to the time that follows on c.
func setClock(c io.Reader) error {
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	ts := unix.NsecToTimespec(int64(binary.BigEndian.Uint64(b[:])))
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("set the clock: %w", err)
	}
	return nil
}

