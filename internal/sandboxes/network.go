package sandboxes

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/network"
)

// MaskHost is the Host header a sandbox's maskRequestHost gives traffic to
// port ("${PORT}" is the port), "" when it has none.
func MaskHost(mask string, port int) string {
	return strings.ReplaceAll(mask, "${PORT}", strconv.Itoa(port))
}

// NetworkUpdate changes a running sandbox's egress; nil fields stay.
type NetworkUpdate struct {
	Internet          *bool
	AllowOut, DenyOut *[]netip.Prefix
	AllowDomains      *[]string
	Rules             *network.Rules
	// SetEgressProxy replaces the upstream proxy with EgressProxy (nil:
	// none).
	SetEgressProxy bool
	EgressProxy    *network.EgressProxy
	// DNSServers replace its resolvers (empty: the node's).
	DNSServers *[]netip.Addr
}
