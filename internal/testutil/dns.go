package testutil

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// FakeDNS is a DNS server on loopback that answers A queries from its
// records (name → IPv4 addresses, a TTL each) and NXDOMAIN for any other
// name; it asks no other server.
type FakeDNS struct {
	Addr netip.AddrPort

	mu      sync.Mutex
	records map[string]fakeRecord
	queries atomic.Int64
}

type fakeRecord struct {
	addrs []netip.Addr
	ttl   uint32
}

// ServeDNS starts a FakeDNS, stopped at cleanup.
func ServeDNS(t testing.TB) *FakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	d := &FakeDNS{Addr: netip.MustParseAddrPort(pc.LocalAddr().String()), records: map[string]fakeRecord{}}
	go d.serve(pc)
	return d
}

// Set answers name with addrs (none: NXDOMAIN), kept for ttl seconds.
func (d *FakeDNS) Set(name string, ttl uint32, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var r fakeRecord
	for _, a := range addrs {
		r.addrs = append(r.addrs, netip.MustParseAddr(a))
	}
	r.ttl = ttl
	d.records[strings.ToLower(strings.TrimSuffix(name, "."))] = r
}

// Queries is how many queries it answered.
func (d *FakeDNS) Queries() int64 { return d.queries.Load() }

func (d *FakeDNS) serve(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var q dnsmessage.Message
		if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
			continue
		}
		d.queries.Add(1)
		question := q.Questions[0]
		resp := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, RecursionAvailable: true}, Questions: q.Questions}
		d.mu.Lock()
		r, ok := d.records[strings.ToLower(strings.TrimSuffix(question.Name.String(), "."))]
		d.mu.Unlock()
		switch {
		case !ok || len(r.addrs) == 0:
			resp.RCode = dnsmessage.RCodeNameError
		case question.Type == dnsmessage.TypeA:
			for _, a := range r.addrs {
				resp.Answers = append(resp.Answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: r.ttl},
					Body:   &dnsmessage.AResource{A: a.As4()},
				})
			}
		}
		if out, err := resp.Pack(); err == nil {
			_, _ = pc.WriteTo(out, from)
		}
	}
}
