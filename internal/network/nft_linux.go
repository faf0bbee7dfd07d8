package network

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The node's firewall is one nftables table of its own, for both address
// families, rebuilt whole on start (idempotent across restarts) and deleted
// on close. Sandboxes have IPv4 only (IPv6 is off on both ends of their
// links); whatever else comes from or goes to their veths is refused first:
//
//	table inet <name> {
//	  set nointernet { ipv4_addr }            sandboxes without egress
//	  set dns        { ipv4_addr }            resolvers sandboxes may use
//	  set blocked    { ipv4_addr, interval }  private, link-local, loopback, host and sandbox networks
//	  map rules      { ipv4_addr : verdict }  sandbox → jump s<slot> { daddr @a<slot> return; daddr @d<slot> reject }
//	  (cv<tag>*: this node's veths; another node on the host has its own tag)
//	  set tunneled   { ipv4_addr }            sandboxes whose TCP goes through an upstream SOCKS5 proxy
//	  chain forward  { iifname cv<tag>*: not IPv4 → reject, established → accept, nointernet → reject,
//	                   dns and udp/tcp port 53 → accept, tunneled → reject, blocked → reject, else accept;
//	                   oifname cv<tag>*: not IPv4 → drop, established → accept, else drop }
//	  chain input    { iifname cv<tag>*: not IPv4 → reject, established → accept,
//	                   redirected to the egress proxy → accept, else reject;
//	                   any other to the egress proxy's port → reject }   (the host itself)
//	  chain output   { oifname cv<tag>*, meta mark TenantMark → reject }  (the server's requests for tenants)
//	  chain postrouting (nat) { IPv4, saddr in sandbox range, oifname not cv* → masquerade }
//	  chain prerouting (nat)  { IPv4, saddr in @tunneled, tcp → redirect to the egress proxy;
//	                            IPv4, saddr in @proxied, tcp dport 80/443 → redirect to the egress proxy }
//	}
type firewall struct {
	conn       *nftables.Conn
	table      *nftables.Table
	noInternet *nftables.Set
	dns        *nftables.Set
	rules      *nftables.Set // vmap: sandbox address → jump to its own chain
	proxied    *nftables.Set // sandboxes whose ports 80 and 443 go to the egress proxy
	tunneled   *nftables.Set // sandboxes whose every TCP port goes there (an upstream proxy)

	mu      sync.Mutex
	offline map[netip.Addr]bool // what noInternet holds
	ruled   map[int]bool        // slots with rules of their own

	proxiedAddrs  map[netip.Addr]bool // what proxied holds
	tunneledAddrs map[netip.Addr]bool // what tunneled holds
}

// vethPrefix names the host ends of sandbox veths; rules match on it.
const vethPrefix = "cv"

func ifname(prefix string) []byte { return []byte(prefix) } // a prefix compare: only len(prefix) bytes

func newFirewall(name, ifPrefix string, sandboxes netip.Prefix, blocked []netip.Prefix, dns []netip.Addr, proxyPort uint16) (*firewall, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	fw := &firewall{conn: c, offline: map[netip.Addr]bool{}, ruled: map[int]bool{}, proxiedAddrs: map[netip.Addr]bool{}, tunneledAddrs: map[netip.Addr]bool{}}
	// An IPv4-only table of this name (before both families were filtered)
	// goes too.
	old := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: name}
	c.AddTable(old)
	c.DelTable(old)
	fw.table = &nftables.Table{Family: nftables.TableFamilyINet, Name: name}
	c.AddTable(fw.table)
	c.DelTable(fw.table) // start from nothing, whatever a previous run left
	c.AddTable(fw.table)
	fw.noInternet = &nftables.Set{Table: fw.table, Name: "nointernet", KeyType: nftables.TypeIPAddr}
	fw.dns = &nftables.Set{Table: fw.table, Name: "dns", KeyType: nftables.TypeIPAddr}
	blockedSet := &nftables.Set{Table: fw.table, Name: "blocked", KeyType: nftables.TypeIPAddr, Interval: true}
	if err := c.AddSet(fw.noInternet, nil); err != nil {
		return nil, err
	}
	var dnsElems []nftables.SetElement
	for _, a := range dns {
		dnsElems = append(dnsElems, nftables.SetElement{Key: a.AsSlice()})
	}
	if err := c.AddSet(fw.dns, dnsElems); err != nil {
		return nil, err
	}
	if err := c.AddSet(blockedSet, intervals(append(blocked, sandboxes))); err != nil {
		return nil, err
	}
	fw.rules = &nftables.Set{Table: fw.table, Name: "rules", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
	if err := c.AddSet(fw.rules, nil); err != nil {
		return nil, err
	}
	fw.proxied = &nftables.Set{Table: fw.table, Name: "proxied", KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(fw.proxied, nil); err != nil {
		return nil, err
	}
	fw.tunneled = &nftables.Set{Table: fw.table, Name: "tunneled", KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(fw.tunneled, nil); err != nil {
		return nil, err
	}
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: fw.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: "input", Table: fw.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: fw.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	pre := c.AddChain(&nftables.Chain{Name: "prerouting", Table: fw.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "output", Table: fw.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})

	rule := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: fw.table, Chain: ch, Exprs: exprs})
	}
	// This node's sandboxes only: another node on the host filters its own.
	fromSandbox := matchIfname(expr.MetaKeyIIFNAME, unix.NFT_CMP_EQ, ifPrefix)
	toSandbox := matchIfname(expr.MetaKeyOIFNAME, unix.NFT_CMP_EQ, ifPrefix)
	// Sandboxes speak IPv4 alone: IPv6 (link-local addresses reach every
	// host service bound to "::") or anything else is refused before the
	// IPv4 rules, whose lookups read IPv4 headers.
	rule(fwd, cat(fromSandbox, notIPv4(), rejectAny())...)
	rule(fwd, cat(toSandbox, notIPv4(), verdict(expr.VerdictDrop))...)
	rule(in, cat(fromSandbox, notIPv4(), rejectAny())...)
	// Established flows skip the lookups (changes take effect for new
	// connections; turning egress off also flushes the sandbox's flows).
	rule(fwd, cat(fromSandbox, established(), verdict(expr.VerdictAccept))...)
	rule(fwd, cat(fromSandbox, lookup(12, fw.noInternet), rejectAdmin())...)
	rule(fwd, cat(fromSandbox, []expr.Any{ // the sandbox's own allowOut/denyOut, if any
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: fw.rules.Name, SetID: fw.rules.ID, IsDestRegSet: true, DestRegister: 0},
	})...)
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} { // the resolvers' DNS, nothing else of theirs
		rule(fwd, cat(fromSandbox, lookup(16, fw.dns), dport(proto, 53), verdict(expr.VerdictAccept))...)
	}
	rule(fwd, cat(fromSandbox, lookup(12, fw.tunneled), rejectAdmin())...) // its TCP was redirected: nothing else leaves
	rule(fwd, cat(fromSandbox, lookup(16, blockedSet), rejectAdmin())...)
	rule(fwd, cat(fromSandbox, verdict(expr.VerdictAccept))...)
	rule(fwd, cat(toSandbox, established(), verdict(expr.VerdictAccept))...)
	rule(fwd, cat(toSandbox, verdict(expr.VerdictDrop))...)
	rule(in, cat(fromSandbox, established(), verdict(expr.VerdictAccept))...)
	// The egress proxy listens on the gateways of sandboxes with domain
	// rules (redirects arrive there): only connections redirected to it
	// reach it.
	rule(in, cat(fromSandbox, tcpDport(proxyPort), redirected(), verdict(expr.VerdictAccept))...)
	rule(in, cat(fromSandbox, rejectAdmin())...)
	rule(in, cat(tcpDport(proxyPort), rejectAny())...)
	// What the server sends on a tenant's behalf (webhooks, image pulls)
	// carries TenantMark, and never goes out to a sandbox, whatever its
	// address checks let through.
	rule(out, cat(toSandbox, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(TenantMark)},
	}, rejectAny())...)
	rule(pre, cat(fromSandbox, isIPv4(), lookup(12, fw.tunneled), []expr.Any{ // every TCP port, through the upstream proxy
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(proxyPort)},
		&expr.Redir{RegisterProtoMin: 1},
	})...)
	for _, port := range []uint16{80, 443} { // name-checked egress
		rule(pre, cat(fromSandbox, isIPv4(), lookup(12, fw.proxied), tcpDport(port), []expr.Any{
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(proxyPort)},
			&expr.Redir{RegisterProtoMin: 1},
		})...)
	}
	rule(post, cat(isIPv4(),
		[]expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: prefixMask(sandboxes), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: sandboxes.Masked().Addr().AsSlice()}},
		matchIfname(expr.MetaKeyOIFNAME, unix.NFT_CMP_NEQ, vethPrefix), // not to any sandbox
		[]expr.Any{&expr.Masq{}})...)
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("install nftables rules: %w", err)
	}
	return fw, nil
}

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func matchIfname(key expr.MetaKey, op expr.CmpOp, prefix string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: ifname(prefix)}}
}

// lookup matches the IPv4 address at offset (12 source, 16 destination) in set.
func lookup(offset uint32, set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
}

// isIPv4 and notIPv4 match a packet's family (the table sees both).
func isIPv4() []expr.Any  { return nfproto(expr.CmpOpEq) }
func notIPv4() []expr.Any { return nfproto(expr.CmpOpNeq) }

func nfproto(op expr.CmpOp) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: []byte{unix.NFPROTO_IPV4}}}
}

// redirected matches a connection whose destination NAT changed (the
// prerouting chain's redirect to the egress proxy).
func redirected() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ctStatusDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// ctStatusDstNAT is conntrack's IPS_DST_NAT status bit.
const ctStatusDstNAT = 1 << 5

func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// rejectAdmin answers ICMP "administratively prohibited": connects fail at
// once instead of timing out.
func rejectAdmin() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 13}}
}

// rejectAny refuses a packet of either family (ICMP or ICMPv6
// "administratively prohibited").
func rejectAny() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

// tcpDport matches TCP to a destination port.
func tcpDport(port uint16) []expr.Any { return dport(unix.IPPROTO_TCP, port) }

// dport matches a transport protocol (TCP or UDP) to a destination port.
func dport(proto byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

func prefixMask(p netip.Prefix) []byte {
	m := make([]byte, 4)
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// intervals turns prefixes into interval-set elements (start, end+1 marked
// as an interval end; a range reaching 255.255.255.255 has no end mark).
func intervals(prefixes []netip.Prefix) []nftables.SetElement {
	var out []nftables.SetElement
	for _, p := range mergePrefixes(prefixes) {
		out = append(out, nftables.SetElement{Key: p.Masked().Addr().AsSlice()})
		if end := lastAddr(p).Next(); end.IsValid() && end.Is4() {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return out
}

// setInternet adds or removes a sandbox address from the no-egress set.
func (fw *firewall) setInternet(addr netip.Addr, allowed bool) error {
	return fw.setMember(fw.noInternet, fw.offline, addr, !allowed)
}

// setMember puts addr in set or takes it out, with members (what the set
// holds, guarded by fw.mu) in step; nothing is sent when it is already so.
func (fw *firewall) setMember(set *nftables.Set, members map[netip.Addr]bool, addr netip.Addr, in bool) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if members[addr] == in {
		return nil
	}
	elems := []nftables.SetElement{{Key: addr.AsSlice()}}
	var err error
	if in {
		err = fw.conn.SetAddElements(set, elems)
	} else {
		err = fw.conn.SetDeleteElements(set, elems)
	}
	if err == nil {
		err = fw.conn.Flush()
	}
	if err != nil {
		return err
	}
	if in {
		members[addr] = true
	} else {
		delete(members, addr)
	}
	return nil
}

// setRules installs a sandbox's own egress rules: allow (which wins) and
// deny lists of prefixes. Both empty removes them. The always-blocked
// ranges stay blocked whatever allow says.
func (fw *firewall) setRules(slot int, addr netip.Addr, allow, deny []netip.Prefix) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	c := fw.conn
	name := "s" + strconv.Itoa(slot)
	chain := &nftables.Chain{Name: name, Table: fw.table}
	allowSet := &nftables.Set{Table: fw.table, Name: "a" + strconv.Itoa(slot), KeyType: nftables.TypeIPAddr, Interval: true}
	denySet := &nftables.Set{Table: fw.table, Name: "d" + strconv.Itoa(slot), KeyType: nftables.TypeIPAddr, Interval: true}
	key := []nftables.SetElement{{Key: addr.AsSlice()}}
	if fw.ruled[slot] { // drop the old ones first, in the same transaction
		if err := c.SetDeleteElements(fw.rules, key); err != nil {
			return err
		}
		c.FlushChain(chain)
		c.DelChain(chain)
		c.DelSet(allowSet)
		c.DelSet(denySet)
	}
	if len(allow) == 0 && len(deny) == 0 {
		if err := c.Flush(); err != nil {
			return err
		}
		delete(fw.ruled, slot)
		return nil
	}
	c.AddChain(chain)
	if err := c.AddSet(allowSet, intervals(allow)); err != nil {
		return err
	}
	if err := c.AddSet(denySet, intervals(deny)); err != nil {
		return err
	}
	c.AddRule(&nftables.Rule{Table: fw.table, Chain: chain, Exprs: cat(lookup(16, allowSet), verdict(expr.VerdictReturn))})
	c.AddRule(&nftables.Rule{Table: fw.table, Chain: chain, Exprs: cat(lookup(16, denySet), rejectAdmin())})
	if err := c.SetAddElements(fw.rules, []nftables.SetElement{{Key: addr.AsSlice(),
		VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: name}}}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("install egress rules of %s: %w", addr, err)
	}
	fw.ruled[slot] = true
	return nil
}

// setProxied sends (or stops sending) a sandbox's ports 80 and 443 to the
// egress proxy.
func (fw *firewall) setProxied(addr netip.Addr, on bool) error {
	return fw.setMember(fw.proxied, fw.proxiedAddrs, addr, on)
}

// setTunneled sends (or stops sending) a sandbox's every TCP connection
// to the egress proxy and refuses the rest of its egress but DNS.
func (fw *firewall) setTunneled(addr netip.Addr, on bool) error {
	return fw.setMember(fw.tunneled, fw.tunneledAddrs, addr, on)
}

func (fw *firewall) close() error {
	fw.conn.DelTable(fw.table)
	return fw.conn.Flush()
}
