// Package network gives each sandbox a network of its own: a network
// namespace joined to the host by a veth pair, an address from a private
// range, a default route through the host, NAT to the outside, and a
// firewall (nftables) that keeps it off the host, its neighbours,
// link-local (cloud metadata) and private networks. Networks are made
// ahead of time in a pool, so a create does not wait for netlink.
package network

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/svid"
)

// Config configures the networks.
type Config struct {
	// Range is where sandbox addresses come from, a /30 each. Default
	// 198.18.0.0/15 (reserved for benchmarking, so it rarely clashes).
	Range netip.Prefix
	// PoolSize is how many networks are kept ready. Default 8.
	PoolSize int
	// Table names the nftables table. Default "cove-<tag>", the tag of the
	// node's veth names (from Range): two nodes on one host with different
	// ranges never rebuild each other's rules.
	Table string
	// DNS are the resolvers sandboxes use (and may reach); default the
	// host's non-loopback ones from /etc/resolv.conf.
	DNS []netip.Addr
	// Allow are ranges sandboxes may reach although they are private
	// (an operator's opt-in).
	Allow []netip.Prefix
	// Owner describes the node for the message another node with the same
	// range gets ("data dir /var/lib/cove").
	Owner string
	// CADir keeps the egress proxy's CA (its key the owner's only); ""
	// makes one in memory at each start.
	CADir string
	// Secrets reveals teams' secrets to the rules that name them; nil: a
	// rule that names one fails its requests.
	Secrets Secrets
	// UpstreamRoots verify the servers transformed requests go to (nil:
	// the host's roots).
	UpstreamRoots *x509.CertPool
	// Flows bound the connections sandboxes hold in the egress proxy.
	Flows FlowLimits
	// Nodes, when set, are the cluster's nodes' own addresses, where no
	// upstream proxy may be (addrpolicy), as the host's own.
	Nodes func() []netip.Addr
	// Descriptors is the process's shared descriptor budget, which every
	// socket of the egress proxy's connections takes one from (nil:
	// they are bounded by Flows alone).
	Descriptors *fdbudget.Budget
	// NameServers are where the egress proxy resolves the names allowOut
	// lets through (a connection by name must go where the name leads);
	// default DNS, port 53: what sandboxes ask.
	NameServers []netip.AddrPort
}

// Manager hands out networks.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	fw     *firewall
	proxy  *egressProxy
	unlock func() // the host-wide lock of the range

	mu       sync.Mutex
	used     map[int]bool
	next     int
	out      int       // networks handed out (Acquire, Adopt) and not released
	ready    chan *Net // made by the pool
	returned chan *Net // given back clean by sandboxes that ended; taken first
	// releases queue networks whose flows are to be forgotten; releasing
	// counts them until they are offered again or freed.
	releases  chan *Net
	releasing sync.WaitGroup
	stop      chan struct{}
	wg        sync.WaitGroup
}

// Net is one sandbox's network.
type Net struct {
	Slot    int
	Addr    netip.Addr // the sandbox's address
	Gateway netip.Addr // the host's end
	NS      *os.File   // the network namespace; the sandbox's init is started inside it
	Veth    string     // the host end's name
	// custom: the firewall holds more for it than the default (egress on,
	// no rules, no domains), so Release must reset it.
	custom bool
	// team is whose sandbox has it (SetTeam), for the egress proxy.
	team string
}

// New sets up the firewall and starts filling the pool.
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	if !cfg.Range.IsValid() {
		cfg.Range = DefaultRange
	}
	if cfg.Range.Bits() > 29 || !cfg.Range.Addr().Is4() {
		return nil, fmt.Errorf("network range %s: want an IPv4 prefix of /29 or larger", cfg.Range)
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 8
	}
	if cfg.Table == "" {
		cfg.Table = "cove-" + strings.TrimPrefix(nodePrefix(cfg.Range), vethPrefix)
	}
	if cfg.DNS == nil {
		cfg.DNS = hostResolvers()
	}
	blocked, err := blockedRanges(cfg)
	if err != nil {
		return nil, err
	}
	unlock, err := lockRange(cfg)
	if err != nil {
		return nil, err
	}
	ca, err := loadEgressCA(cfg.CADir)
	if err != nil {
		unlock()
		return nil, err
	}
	proxy, err := newEgressProxy(append(blocked, cfg.Range), ca, cfg.Secrets, cfg.Flows, cfg.Descriptors, log)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	proxy.upstreamRoots, proxy.upstreams = cfg.UpstreamRoots, upstreamPolicy(cfg)
	servers := cfg.NameServers
	if servers == nil {
		for _, d := range cfg.DNS {
			servers = append(servers, netip.AddrPortFrom(d, 53))
		}
	}
	proxy.names = newNameResolver(servers)
	fw, err := newFirewall(cfg.Table, nodePrefix(cfg.Range), cfg.Range, blocked, cfg.DNS, proxy.port())
	if err != nil {
		proxy.close()
		unlock()
		return nil, err
	}
	m := &Manager{cfg: cfg, log: log, fw: fw, proxy: proxy, unlock: unlock, used: map[int]bool{}, ready: make(chan *Net, cfg.PoolSize), returned: make(chan *Net, cfg.PoolSize), releases: make(chan *Net, 4096), stop: make(chan struct{})}
	if _, err = enableForwarding(); err != nil {
		fw.close()
		proxy.close()
		unlock()
		return nil, err
	}
	m.wg.Add(2)
	go m.fill()
	go m.forget()
	return m, nil
}

// DNS are the resolvers to write into sandboxes' resolv.conf.
func (m *Manager) DNS() []netip.Addr { return m.cfg.DNS }

// slots is how many /30 networks the range holds.
func (m *Manager) slots() int { return 1 << (32 - m.cfg.Range.Bits() - 2) }

func (m *Manager) slotAddrs(slot int) (gw, addr netip.Addr) {
	base := m.cfg.Range.Masked().Addr().As4()
	n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	n += uint32(slot) * 4
	a := func(v uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return a(n + 1), a(n + 2)
}

// vethName names a slot's host end: the prefix, two characters telling
// this range's networks from another node's on the same host, the slot.
func (m *Manager) vethName(slot int) string {
	return nodePrefix(m.cfg.Range) + strconv.FormatInt(int64(slot), 36)
}

// nodePrefix starts the names of a node's veths: "cv" and two characters
// from its range, so nodes sharing a host (or tests beside a server) each
// match only their own interfaces.
// InterfacePrefix is how the host ends of the veths of a node with range r
// are named: "cv" and a tag of two characters from the range.
func InterfacePrefix(r netip.Prefix) string { return nodePrefix(r) }

func nodePrefix(r netip.Prefix) string {
	h := fnv.New32a()
	h.Write([]byte(r.String()))
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	v := h.Sum32() % (36 * 36)
	return vethPrefix + string(digits[v/36]) + string(digits[v%36])
}

// reserve picks a free slot whose previous veth the kernel has removed.
func (m *Manager) reserve() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range m.slots() {
		slot := m.next
		m.next = (m.next + 1) % m.slots()
		if m.used[slot] {
			continue
		}
		if _, err := netlink.LinkByName(m.vethName(slot)); err == nil {
			continue // still being torn down
		}
		m.used[slot] = true
		return slot, nil
	}
	return 0, errRangeUsedUp
}

// errRangeUsedUp: every slot of the range is handed out or on its way back.
var errRangeUsedUp = errs.New(errs.Unavailable, "no free sandbox network: the address range is used up")

func (m *Manager) unreserve(slot int) {
	m.mu.Lock()
	delete(m.used, slot)
	m.mu.Unlock()
}

// Acquire returns a ready network with egress allowed or not.
func (m *Manager) Acquire(ctx context.Context, internet bool) (*Net, error) {
	var n *Net
	select {
	case n = <-m.returned:
	default:
		select {
		case n = <-m.ready:
		default:
			var err error
			if n, err = m.make(); errors.Is(err, errRangeUsedUp) {
				n, err = m.await(ctx)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if !internet { // a pooled network is released with egress on
		if err := m.SetInternet(n, false); err != nil {
			m.discard(n)
			return nil, fmt.Errorf("set egress of %s: %w", n.Addr, err)
		}
	}
	m.mu.Lock()
	m.out++
	m.mu.Unlock()
	return n, nil
}

// releaseWait is how long Acquire waits for a network when the range is
// used up: released ones come back within forgetWindow (and the kernel's
// removal of their veths), so under a stream of creates and kills a create
// waits its turn rather than fail.
const releaseWait = 3 * forgetWindow

// await waits up to releaseWait (or ctx) for a network to come back or a
// slot to free, for a range used up.
func (m *Manager) await(ctx context.Context) (*Net, error) {
	deadline := time.NewTimer(releaseWait)
	defer deadline.Stop()
	retry := time.NewTicker(forgetWindow / 10)
	defer retry.Stop()
	for {
		select {
		case n := <-m.returned:
			return n, nil
		case n := <-m.ready:
			return n, nil
		case <-ctx.Done():
			return nil, errRangeUsedUp
		case <-deadline.C:
			return nil, errRangeUsedUp
		case <-retry.C:
			if n, err := m.make(); !errors.Is(err, errRangeUsedUp) {
				return n, err
			}
		}
	}
}

// Levels are the networks ready for a sandbox (made, or given back and
// kept) and those handed out to sandboxes.
func (m *Manager) Levels() (ready, handedOut int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ready) + len(m.returned), m.out
}

// InUse lists the slots handed out and not released.
func (m *Manager) InUse() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for slot := range m.used {
		out = append(out, slot)
	}
	return out
}

// SetTeam names the team whose sandbox has the network: its connections
// through the egress proxy count in that team's share (FlowLimits.PerTeam).
// It applies to the policies set after it: call it first.
func (m *Manager) SetTeam(n *Net, team string) { n.team = team }

// SetRules gives a network egress rules of its own: destinations in allow
// are reachable even when deny covers them; deny ("0.0.0.0/0" = all
// traffic) is refused. Host, neighbour, link-local and private ranges stay
// blocked whatever allow says. Empty lists remove the rules.
func (m *Manager) SetRules(n *Net, allow, deny []netip.Prefix) error {
	n.custom = n.custom || len(allow) > 0 || len(deny) > 0
	if err := m.fw.setRules(n.Slot, n.Addr, allow, deny); err != nil {
		return err
	}
	return m.setPolicy(n, func(p *policy) { p.allow, p.deny = allow, deny })
}

// SetDomains lets a network reach these names (exact, or "*.example.com")
// on ports 80 and 443 through the egress proxy, which checks TLS SNI and the
// HTTP Host. Meant with a deny of all traffic (E2B's rule); empty turns it
// off.
func (m *Manager) SetDomains(n *Net, domains []string) error {
	n.custom = n.custom || len(domains) > 0
	return m.setPolicy(n, func(p *policy) { p.domains = domains })
}

// SetTransforms gives a network rules that transform its requests to
// their domains (ports 80 and 443, through the egress proxy), their
// secrets the team's and their tokens the sandbox's (w); empty rules turn
// it off. Rules grant no access.
func (m *Manager) SetTransforms(n *Net, w Workload, rules Rules) error {
	n.custom = n.custom || len(rules) > 0
	return m.setPolicy(n, func(p *policy) { p.workload, p.rules = w, rules })
}

// SetIdentity gives the egress proxy the issuer that mints the workload
// tokens rules name (nil: none; a rule that names one fails its
// requests). A server sets it once it listens: the issuer's URL may carry
// the listener's port.
func (m *Manager) SetIdentity(i *svid.Issuer) { m.proxy.identity.Store(i) }

// MintsTokens says whether the egress proxy mints workload tokens (the
// node has an identity issuer).
func (m *Manager) MintsTokens() bool { return m.proxy.identity.Load() != nil }

// SetEgressProxy sends a network's outbound TCP through an upstream SOCKS5
// proxy (nil: directly), after its own rules; the rest of its egress but
// DNS is refused meanwhile. A proxy the node may not reach (a private,
// loopback, link-local or host address) is InvalidArgument.
func (m *Manager) SetEgressProxy(ctx context.Context, n *Net, e *EgressProxy) error {
	if e != nil {
		if err := e.Check(); err != nil {
			return err
		}
		if _, err := m.proxy.resolveUpstream(ctx, e); err != nil {
			return err
		}
	}
	n.custom = n.custom || e != nil
	if err := m.setPolicy(n, func(p *policy) { p.upstream = e }); err != nil {
		return err
	}
	return m.fw.setTunneled(n.Addr, e != nil)
}

// setPolicy changes what the egress proxy enforces for a network, and
// sends its ports 80 and 443 there while it has names or rules.
func (m *Manager) setPolicy(n *Net, change func(*policy)) error {
	proxied, err := m.proxy.update(n.Addr, n.Gateway, func(p *policy) {
		p.team = n.team
		change(p)
	})
	if err != nil {
		return err
	}
	return m.fw.setProxied(n.Addr, proxied)
}

// EgressCA is the PEM certificate of the CA the egress proxy shows
// sandboxes for the names whose requests it transforms: what a sandbox
// with such rules trusts.
func (m *Manager) EgressCA() []byte { return m.proxy.ca.PEM }

// CloseFlows closes every connection a network holds in the egress
// proxy (its sandbox is paused: a resumed one finds them reset, as after
// a microVM's snapshot).
func (m *Manager) CloseFlows(n *Net) { m.proxy.flows.closeAll(n.Addr) }

// Flows is how many connections a network holds in the egress proxy.
func (m *Manager) Flows(n *Net) int { return m.proxy.flows.count(n.Addr) }

// FlowStats is what the egress proxy holds for all sandboxes, and what it
// refused.
func (m *Manager) FlowStats() FlowStats { return m.proxy.flows.stats() }

// SetInternet turns a network's egress on or off.
func (m *Manager) SetInternet(n *Net, allowed bool) error {
	n.custom = n.custom || !allowed
	if err := m.fw.setInternet(n.Addr, allowed); err != nil {
		return err
	}
	return m.setPolicy(n, func(p *policy) { p.internet = allowed })
}

// Adopt marks the slot of a network a restarted node finds in use; ns (may
// be nil) is a handle to its namespace, which lets it be reused later.
func (m *Manager) Adopt(slot int, ns *os.File, internet bool) (*Net, error) {
	m.mu.Lock()
	m.used[slot] = true
	m.out++
	m.mu.Unlock()
	gw, addr := m.slotAddrs(slot)
	n := &Net{Slot: slot, Addr: addr, Gateway: gw, Veth: m.vethName(slot), NS: ns, custom: true} // rules unknown: reset on release
	return n, m.SetInternet(n, internet)
}

// forgetFlows drops the connection-tracking entries of an address, so a
// later sandbox given the same address inherits none of its flows.
func forgetFlows(addrs []netip.Addr) {
	var filters []netlink.CustomConntrackFilter
	for _, a := range addrs {
		ip := net.IP(a.AsSlice())
		for _, dir := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP} {
			f := &netlink.ConntrackFilter{}
			if f.AddIP(dir, ip) == nil {
				filters = append(filters, f)
			}
		}
	}
	if len(filters) > 0 {
		_, _ = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, filters...)
	}
}

// forgetWindow is how long released networks gather before their flows
// are forgotten together: a dump costs ≈ 10 ms of kernel time, so at most
// 2 % of a core, whatever the rate of kills (at 100 ms it was a twentieth
// of the node's CPU under a stream of creates and kills). A released
// network waits that long before it is offered again.
const forgetWindow = 500 * time.Millisecond

// forget takes released networks, forgets their flows in batches and
// offers them again. One dump of the conntrack table walks all its buckets
// (≈ 10 ms of kernel time here, whatever the table holds): a batch pays it
// once for every network released while the last one ran.
func (m *Manager) forget() {
	defer m.wg.Done()
	for {
		var batch []*Net
		select {
		case n := <-m.releases:
			batch = append(batch, n)
		case <-m.stop:
			for { // the last ones, then stop
				select {
				case n := <-m.releases:
					batch = append(batch, n)
					continue
				default:
				}
				break
			}
			m.forgetBatch(batch)
			return
		}
		// Gather what else is released within forgetWindow: at most a
		// dump per window, whatever the rate of kills.
		window := time.After(forgetWindow)
	more:
		for {
			select {
			case n := <-m.releases:
				batch = append(batch, n)
			case <-window:
				break more
			case <-m.stop:
				break more
			}
		}
		m.forgetBatch(batch)
	}
}

func (m *Manager) forgetBatch(batch []*Net) {
	if len(batch) == 0 {
		return
	}
	addrs := make([]netip.Addr, len(batch))
	for i, n := range batch {
		addrs[i] = n.Addr
	}
	forgetFlows(addrs)
	for _, n := range batch {
		if n.NS != nil {
			select {
			case m.returned <- n:
				m.releasing.Done()
				continue
			default:
			}
		}
		m.discard(n)
		m.releasing.Done()
	}
}

// Release gives a network back once its sandbox is gone. Its rules and
// tracked flows are dropped; a network whose namespace the caller kept goes
// back into the pool for the next sandbox (nothing in a sandbox can change
// its own interfaces, addresses or routes: no CAP_NET_ADMIN), which spares
// making one and the kernel's teardown of this one. Otherwise the
// namespace went with the sandbox's last process, and the kernel removes
// the veth in the background. Release returns before the flows are gone.
func (m *Manager) Release(n *Net) {
	m.mu.Lock()
	m.out--
	m.mu.Unlock()
	if n.custom { // back to the default, in the firewall and the egress proxy
		_ = m.fw.setInternet(n.Addr, true)
		_ = m.fw.setRules(n.Slot, n.Addr, nil, nil)
		_ = m.fw.setProxied(n.Addr, false)
		_ = m.fw.setTunneled(n.Addr, false)
		m.proxy.forget(n.Addr, n.Gateway)
		n.custom = false
	}
	n.team = ""
	// Its flows are forgotten in the background (forget), and only then is
	// it offered again.
	m.releasing.Add(1)
	m.releases <- n
}

// discard frees a network for good.
func (m *Manager) discard(n *Net) {
	if n.NS != nil {
		n.NS.Close()
		n.NS = nil
	}
	m.unreserve(n.Slot)
}

func (m *Manager) fill() {
	defer m.wg.Done()
	wait := 10 * time.Millisecond
	for {
		n, err := m.make()
		if err != nil {
			// The range may be used up until sandboxes end: try again
			// later, not in a loop that spins and floods the log.
			m.log.Error("prepare a sandbox network", logx.Err(err))
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		wait = 10 * time.Millisecond
		select {
		case m.ready <- n:
		case <-m.stop:
			m.discard(n)
			return
		}
	}
}

// Close stops the pool and frees the ready networks. When no network is in
// use any more it also removes the firewall table and restores
// ip_forward; otherwise the rules stay for the running sandboxes (the next
// start rebuilds them and adopts their networks).
func (m *Manager) Close() {
	close(m.stop)
	m.wg.Wait() // forget has offered or freed every released network
	m.releasing.Wait()
	for {
		select {
		case n := <-m.ready:
			m.discard(n)
			continue
		case n := <-m.returned:
			m.discard(n)
			continue
		default:
		}
		break
	}
	m.proxy.close()
	if len(m.InUse()) == 0 {
		_ = m.fw.close()
		restoreForwarding(m.fw)
	}
	m.unlock()
}

// forwardMark records, for the whole host, that a Cove node turned IPv4
// forwarding on: several nodes (or test servers) may share a host, and the
// last one to go turns it back off. /run is cleared on reboot, as is
// ip_forward.
const (
	forwardFile = "/proc/sys/net/ipv4/ip_forward"
	forwardMark = "/run/cove/ip_forward.was"
)

func enableForwarding() ([]byte, error) {
	was, err := os.ReadFile(forwardFile)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(was)) == "1" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(forwardMark), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(forwardMark, was, 0o644); err != nil {
		return nil, err
	}
	return was, os.WriteFile(forwardFile, []byte("1"), 0)
}

// restoreForwarding turns forwarding back to what it was before the first
// node turned it on, once no Cove firewall table is left on the host.
func restoreForwarding(fw *firewall) {
	tables, err := fw.conn.ListTables()
	if err != nil {
		return
	}
	for _, t := range tables {
		if strings.HasPrefix(t.Name, "cove") {
			return // another node still needs it
		}
	}
	was, err := os.ReadFile(forwardMark)
	if err != nil {
		return
	}
	if os.WriteFile(forwardFile, was, 0) == nil {
		_ = os.Remove(forwardMark)
		_ = os.Remove(filepath.Dir(forwardMark))
	}
}

// hostResolvers reads the host's non-loopback resolvers.
func hostResolvers() []netip.Addr {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Addr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() && !a.IsLoopback() {
				out = append(out, a)
			}
		}
	}
	return out
}

// blockedRanges is alwaysBlocked plus every network of the host's own
// interfaces, less what the operator allows.
func blockedRanges(cfg Config) ([]netip.Prefix, error) {
	out := append([]netip.Prefix(nil), alwaysBlocked...)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if p, err := netip.ParsePrefix(ipn.String()); err == nil && p.Addr().Is4() {
				out = append(out, p.Masked())
			}
		}
	}
	if len(cfg.Allow) == 0 {
		return out, nil
	}
	var kept []netip.Prefix
	for _, p := range out {
		allowed := false
		for _, a := range cfg.Allow {
			allowed = allowed || (a.Contains(p.Addr()) && a.Bits() <= p.Bits())
		}
		if !allowed {
			kept = append(kept, p)
		}
	}
	// Loopback, link-local (metadata), multicast and reserved space stay
	// blocked whatever the operator allows.
	return append(kept, neverAllowed...), nil
}
