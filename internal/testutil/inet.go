package testutil

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/isolation/hostproc"
)

// Fake internet addresses: web servers at InternetAddr:8080 and :80 (the
// latter answers "served <Host>", and the Authorization header it got) and a fake cloud metadata service at
// MetadataAddr:80, in a network namespace of the
// test's own (TEST-NET-3), routed from the host through a veth. Nothing
// leaves the machine.
const (
	InternetAddr = "203.0.113.1"
	MetadataAddr = "169.254.169.254"
	internetHost = "203.0.113.254"
)

// FakeInternet builds the fake internet and returns its namespace; its
// servers answer "hello from <addr> to <client ip>". Everything is removed
// at cleanup.
func FakeInternet(t testing.TB) netns.NsHandle {
	t.Helper()
	HoldFakeInternet(t)
	ns, err := hostproc.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	name := fmt.Sprintf("tinet%d", os.Getpid()%100000)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 65535}, PeerName: name + "p", PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	step := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	host, err := netlink.LinkByName(name)
	step(err)
	// The host's end has its address alone (a /32) and a route to the
	// rest: a cove server that starts meanwhile blocks its host's networks
	// for its sandboxes, and the fake internet must not be one.
	step(netlink.AddrAdd(host, mustAddr(internetHost+"/32")))
	step(netlink.LinkSetUp(host))
	_, internet, _ := net.ParseCIDR(InternetAddr + "/24")
	step(netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: internet, Scope: netlink.SCOPE_LINK}))
	step(netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: mustAddr(MetadataAddr + "/32").IPNet, Gw: net.ParseIP(InternetAddr)}))
	h, err := netlink.NewHandleAt(ns)
	step(err)
	defer h.Close()
	inner, err := h.LinkByName(name + "p")
	step(err)
	lo, err := h.LinkByName("lo")
	step(err)
	step(h.AddrAdd(inner, mustAddr(InternetAddr+"/24")))
	step(h.AddrAdd(lo, mustAddr(MetadataAddr+"/32")))
	step(h.LinkSetUp(inner))
	step(h.LinkSetUp(lo))
	step(h.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Gw: net.ParseIP(internetHost)}))
	web, err := ListenIn(ns, InternetAddr+":80") // names its Host, for egress rules by name
	step(err)
	webSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); auth != "" { // what an egress rule set
			fmt.Fprintf(w, "served %s auth=%q", r.Host, auth)
			return
		}
		fmt.Fprint(w, "served "+r.Host)
	})}
	go webSrv.Serve(web)
	t.Cleanup(func() { webSrv.Close() })
	for _, addr := range []string{InternetAddr + ":8080", MetadataAddr + ":80"} {
		ln, err := ListenIn(ns, addr)
		step(err)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			from, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprint(w, "hello from "+addr+" to "+from)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return ns
}

// FakeInternetOnHost makes the fake internet (FakeInternet's, made first)
// one of the host's own networks, as an operator's resolver on the host's
// LAN is: its host end gets an address in the fake internet's /24, which
// a cove server that starts afterwards blocks for its sandboxes. It goes
// with the fake internet.
func FakeInternetOnHost(t testing.TB) {
	t.Helper()
	host, err := netlink.LinkByName(fmt.Sprintf("tinet%d", os.Getpid()%100000))
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(host, mustAddr("203.0.113.253/24")); err != nil {
		t.Fatal(err)
	}
}

// HoldFakeInternet takes the host-wide lock on the fake internet's
// addresses and routes until the test ends: test binaries of several
// packages run at once, and two fake internets would claim the same routes.
func HoldFakeInternet(t testing.TB) {
	f, err := os.OpenFile("/run/cove-test-fake-internet.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// ListenIn opens a TCP listener inside the network namespace ns.
func ListenIn(ns netns.NsHandle, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetNS(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// ServeDNSIn starts a FakeDNS on addr (UDP) inside the network namespace
// ns (a fake internet's), stopped at cleanup.
func ServeDNSIn(t testing.TB, ns netns.NsHandle, addr string) *FakeDNS {
	t.Helper()
	pc, err := ListenUDPIn(ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &FakeDNS{Addr: netip.MustParseAddrPort(pc.LocalAddr().String()), records: map[string]fakeRecord{}}
	go d.serve(pc)
	return d
}

// ListenUDPIn opens a UDP socket inside the network namespace ns.
func ListenUDPIn(ns netns.NsHandle, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := inNetNS(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", addr)
		return err
	})
	return pc, err
}

// inNetNS runs f on a thread in the network namespace ns (which the
// caller keeps), then back in this thread's.
func inNetNS(ns netns.NsHandle, f func() error) error {
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer host.Close()
	fd, err := unix.Dup(int(ns))
	if err != nil {
		return err
	}
	target := os.NewFile(uintptr(fd), "netns")
	defer target.Close()
	return hostproc.InNetNS(target, host, f)
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}
