package guest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation"
)

// serveControl serves ControlPort on addr for the node: exports of the
// writable layer upper (the overlay's upper directory) of the sandbox in
// cgroup, frozen for the copy, one at a time; the clock; the address of
// eth0, which is now cur; the host name, also in the files of the root
// (with its resolvers, dns).
func serveControl(addr, upper, cgroup string, cur Address, root string, dns []string) error {
	// No keepalive: a connection the node left open is closed by a
	// request (RequestThaw), not by a probe's reset some time later.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(addr, strconv.Itoa(ControlPort)))
	if err != nil {
		return err
	}
	var exports, addressing sync.Mutex
	var pending struct { // the export that waits for the node's close
		sync.Mutex
		c net.Conn
	}
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
					pending.Lock()
					pending.c = c
					pending.Unlock()
					export(c, upper, cgroup)
					pending.Lock()
					pending.c = nil
					pending.Unlock()
				case RequestThaw:
					pending.Lock()
					if pending.c != nil {
						pending.c.Close() // its export thaws the sandbox too
					}
					pending.Unlock()
					writeOutcome(c, freeze(cgroup, false))
				case RequestClock:
					writeOutcome(c, setClock(c))
				case RequestHostname:
					writeOutcome(c, setHostname(c, root, dns))
				case RequestSeed:
					writeOutcome(c, reseed(c))
				case RequestAddress:
					addressing.Lock()
					defer addressing.Unlock()
					writeOutcome(c, setAddress(c, &cur))
				default:
					writeOutcome(c, fmt.Errorf(unknownRequest+"%q", req[0]))
				}
			}()
		}
	}()
	return nil
}

// reseed credits the SeedSize bytes that follow on c to the kernel's
// entropy pool and has it reseed its generator from the pool at once.
func reseed(c io.Reader) error {
	seed := make([]byte, SeedSize)
	if _, err := io.ReadFull(c, seed); err != nil {
		return err
	}
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info: the bits credited, the bytes, the bytes.
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return fmt.Errorf("RNDADDENTROPY: %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDRESEEDCRNG, 0); e != 0 {
		return fmt.Errorf("RNDRESEEDCRNG: %w", e)
	}
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

// setAddress moves eth0 from the address *cur to the one that follows on
// c, and the default route to its gateway.
func setAddress(c io.Reader, cur *Address) error {
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(n[:]) > 4096 {
		return errors.New("an address of more than 4 KiB")
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	var next Address
	if err := json.Unmarshal(body, &next); err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(next.Address)
	if err != nil {
		return err
	}
	gw := net.ParseIP(next.Gateway)
	if gw == nil {
		return fmt.Errorf("gateway %q", next.Gateway)
	}
	eth, err := netlink.LinkByName("eth0")
	if err != nil {
		return err
	}
	// The link-local address (a guest without the pool's) stays: the
	// node dials it.
	if old, err := netlink.ParseAddr(cur.Address); err == nil && !old.Equal(*addr) && old.IP.String() != GuestAddr {
		if err := netlink.AddrDel(eth, old); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("remove %s: %w", old, err)
		}
	}
	if err := netlink.AddrReplace(eth, addr); err != nil {
		return fmt.Errorf("eth0's address %s: %w", addr, err)
	}
	if err := netlink.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("the default route: %w", err)
	}
	*cur = next
	return nil
}

// setHostname names the guest as what follows on c, and writes the name
// into the root's files.
func setHostname(c io.Reader, root string, dns []string) error {
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	name := make([]byte, n[0])
	if _, err := io.ReadFull(c, name); err != nil {
		return err
	}
	if err := isolation.ValidateID(string(name)); err != nil {
		return err
	}
	if err := unix.Sethostname(name); err != nil {
		return err
	}
	return isolation.WriteIdentity(root, string(name), dns)
}
