package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// nameResolver tells the egress proxy where a name is, as a sandbox would
// find it: it asks the resolvers sandboxes are given (Config.DNS, or
// Config.NameServers), for IPv4 addresses, and keeps each answer for its
// TTL (between minTTL and maxTTL; a failure for minTTL), so a connection
// allowed by name goes where that name leads, not where the client says.
type nameResolver struct {
	servers []netip.AddrPort
	// fallback asks when no server is set (a host whose resolvers are all
	// on loopback, which sandboxes cannot use anyway).
	fallback *net.Resolver

	mu    sync.Mutex
	cache map[string]answer
}

type answer struct {
	addrs []netip.Addr
	err   error
	until time.Time
}

const (
	minTTL       = 5 * time.Second
	maxTTL       = 5 * time.Minute
	maxCached    = 4096 // names; past it the cache starts again
	queryTimeout = 2 * time.Second
)

func newNameResolver(servers []netip.AddrPort) *nameResolver {
	return &nameResolver{servers: servers, fallback: net.DefaultResolver, cache: map[string]answer{}}
}

// resolvesTo says whether name has addr among its IPv4 addresses.
func (r *nameResolver) resolvesTo(ctx context.Context, name string, addr netip.Addr) (bool, error) {
	addrs, err := r.lookup(ctx, name)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if a.Unmap() == addr {
			return true, nil
		}
	}
	return false, nil
}

func (r *nameResolver) lookup(ctx context.Context, name string) ([]netip.Addr, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	now := time.Now()
	r.mu.Lock()
	a, ok := r.cache[name]
	r.mu.Unlock()
	if ok && now.Before(a.until) {
		return a.addrs, a.err
	}
	addrs, ttl, err := r.query(ctx, name)
	if err != nil {
		ttl = minTTL
	}
	ttl = min(max(ttl, minTTL), maxTTL)
	r.mu.Lock()
	if len(r.cache) >= maxCached {
		clear(r.cache)
	}
	r.cache[name] = answer{addrs: addrs, err: err, until: now.Add(ttl)}
	r.mu.Unlock()
	return addrs, err
}

// query asks each server in turn for name's A records; the TTL is the
// smallest of the answer's.
func (r *nameResolver) query(ctx context.Context, name string) ([]netip.Addr, time.Duration, error) {
	if len(r.servers) == 0 {
		addrs, err := r.fallback.LookupNetIP(ctx, "ip4", name)
		return addrs, minTTL, err
	}
	q, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return nil, 0, fmt.Errorf("resolve %q: %w", name, err)
	}
	var last error
	for _, s := range r.servers {
		addrs, ttl, err := ask(ctx, s, q)
		if err == nil {
			return addrs, ttl, nil
		}
		last = err
	}
	return nil, 0, fmt.Errorf("resolve %q: %w", name, last)
}

// ask sends one A query for q to server over UDP and reads its answer:
// the A records of q and of the names its CNAMEs lead to.
func ask(ctx context.Context, server netip.AddrPort, q dnsmessage.Name) ([]netip.Addr, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", server.String())
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	id := uint16(time.Now().UnixNano())
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: q, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	packed, err := msg.Pack()
	if err != nil {
		return nil, 0, err
	}
	if _, err := c.Write(packed); err != nil {
		return nil, 0, err
	}
	buf := make([]byte, 1500)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, 0, err
		}
		var resp dnsmessage.Message
		if err := resp.Unpack(buf[:n]); err != nil || resp.ID != id || !resp.Response {
			continue // not the answer to this query
		}
		if resp.RCode != dnsmessage.RCodeSuccess {
			return nil, 0, fmt.Errorf("%s answered %s", server, resp.RCode)
		}
		return addrsOf(resp, q)
	}
}

func addrsOf(resp dnsmessage.Message, q dnsmessage.Name) ([]netip.Addr, time.Duration, error) {
	names := map[string]bool{strings.ToLower(q.String()): true}
	ttl := maxTTL
	var addrs []netip.Addr
	for range 8 { // CNAME chains, in any order in the answer
		grew := false
		for _, rr := range resp.Answers {
			if !names[strings.ToLower(rr.Header.Name.String())] {
				continue
			}
			switch b := rr.Body.(type) {
			case *dnsmessage.CNAMEResource:
				if t := strings.ToLower(b.CNAME.String()); !names[t] {
					names[t], grew = true, true
				}
			}
		}
		if !grew {
			break
		}
	}
	for _, rr := range resp.Answers {
		if b, ok := rr.Body.(*dnsmessage.AResource); ok && names[strings.ToLower(rr.Header.Name.String())] {
			addrs = append(addrs, netip.AddrFrom4(b.A))
			ttl = min(ttl, time.Duration(rr.Header.TTL)*time.Second)
		}
	}
	if len(addrs) == 0 {
		return nil, 0, errors.New("no IPv4 address")
	}
	return addrs, ttl, nil
}
