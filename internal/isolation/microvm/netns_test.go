package microvm

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/covesandbox/cove/internal/agentclient"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/isolation/isolationtest"
)

// TestPoolNetwork gives a guest a namespace wired as the node's pool wires
// one (eth0 with the sandbox's address, a route through the host's end of
// a veth): the guest carries the sandbox's address, reaches the host's
// end from it, nothing reaches the guest from outside, and after the
// destroy the namespace is as the pool made it.
func TestPoolNetwork(t *testing.T) {
	cfg, rootFS := testDriver(t)
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The pool's namespace, on a /30 of its own.
	octet := 100 + os.Getpid()%100
	gw, addr := net.IPv4(10, 251, byte(octet), 1), net.IPv4(10, 251, byte(octet), 2)
	ns := poolNamespace(t, "cvmt"+strconv.Itoa(os.Getpid()%100000), gw, addr)
	ln, err := net.Listen("tcp", net.JoinHostPort(gw.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := isolationtest.NewID()
	spec := isolation.Spec{RootFS: rootFS, Limits: isolation.Limits{CPUMillis: 1000, MemoryMB: 256, DiskMB: 64, PIDs: 256}, NetNS: ns}
	if _, err := d.Create(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	defer d.Destroy(context.Background(), id)
	c := agentclient.New(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, id, 49983) })
	defer c.Close()

	peers := make(chan string, 2)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- conn.RemoteAddr().(*net.TCPAddr).IP.String()
			conn.Close()
		}
	}()
	// The guest announced its addresses as eth0 came up (arp_notify).
	res, err := c.Run(ctx, "root", "hostname -I; cat /proc/sys/net/ipv4/conf/eth0/arp_notify", time.Minute)
	if err != nil || !strings.Contains(string(res.Stdout), addr.String()) || !strings.HasSuffix(string(res.Stdout), "\n1\n") {
		t.Errorf("the guest's addresses and arp_notify: %v %q, want the sandbox's %s and 1", err, res.Stdout, addr)
	}
	connect := "python3 -c 'import socket; socket.create_connection((\"" + gw.String() + "\", " + strconv.Itoa(port) + "), 5).close(); print(\"connected\")'"
	res, err = c.Run(ctx, "root", connect, time.Minute)
	if err != nil || !strings.Contains(string(res.Stdout), "connected") {
		t.Fatalf("%s: %v %q %q", connect, err, res.Stdout, res.Stderr)
	}
	select {
	case peer := <-peers:
		if peer != addr.String() {
			t.Errorf("the guest's connection came from %s, want the sandbox's %s", peer, addr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the host's end saw no connection")
	}
	// From outside, only replies reach the guest: not its agent's port.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(addr.String(), "49983"), 2*time.Second); err == nil {
		conn.Close()
		t.Error("the agent's port answers at the sandbox's address from the host")
	}

	if err := d.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if left := leaks(d.cfg.Dir, id); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	err = hostproc.InNetNS(ns, host, func() error {
		if _, err := netlink.LinkByName(tapName); err == nil {
			t.Error("the tap is left in the pool's namespace")
		}
		if b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); strings.TrimSpace(string(b)) != "0" {
			t.Errorf("forwarding left on: %q", b)
		}
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		tables, err := conn.ListTables()
		if err != nil {
			return err
		}
		if len(tables) > 0 {
			t.Errorf("nftables tables left: %d", len(tables))
		}
		eth, err := netlink.LinkByName(poolLink)
		if err != nil {
			return err
		}
		addrs, _ := netlink.AddrList(eth, netlink.FAMILY_V4)
		if len(addrs) != 1 || !addrs[0].IP.Equal(addr) {
			t.Errorf("eth0's addresses after the guest: %v", addrs)
		}
		routes, _ := netlink.RouteList(nil, netlink.FAMILY_V4)
		var gws []string
		for _, r := range routes {
			if r.Gw != nil {
				gws = append(gws, r.Gw.String())
			}
		}
		if len(routes) != 2 || len(gws) != 1 || gws[0] != gw.String() { // the /30's and the default
			t.Errorf("routes after the guest: %v", routes)
		}
		if b, _ := os.ReadFile("/proc/sys/net/ipv4/conf/eth0/proxy_arp"); strings.TrimSpace(string(b)) != "0" {
			t.Errorf("proxy ARP left on: %q", b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// poolNamespace makes a namespace as the node's network pool does: a veth
// whose host end (name) has gw and whose other end, eth0, has addr and the
// default route through gw.
func poolNamespace(t *testing.T, name string, gw, addr net.IP) *os.File {
	t.Helper()
	h, err := hostproc.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	ns := os.NewFile(uintptr(h), "pool-netns")
	t.Cleanup(func() { ns.Close() })
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p", PeerNamespace: netlink.NsFd(h)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			netlink.LinkDel(l)
		}
	})
	hostEnd, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(hostEnd, &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: net.CIDRMask(30, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(hostEnd); err != nil {
		t.Fatal(err)
	}
	in, err := netlink.NewHandleAt(netns.NsHandle(h))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	eth, err := in.LinkByName(name + "p")
	if err == nil {
		err = in.LinkSetName(eth, poolLink)
	}
	if err == nil {
		err = in.AddrAdd(eth, &netlink.Addr{IPNet: &net.IPNet{IP: addr, Mask: net.CIDRMask(30, 32)}})
	}
	if err == nil {
		err = in.LinkSetUp(eth)
	}
	if err == nil {
		err = in.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw})
	}
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
