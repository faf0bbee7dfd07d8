package service

import (
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/errs"
)

// TestParseDNSServers: network.dnsServers are at most 10 IPv4 addresses a
// sandbox could reach, none twice.
func TestParseDNSServers(t *testing.T) {
	t.Parallel()
	eleven := strings.Split(strings.Repeat("203.0.113.1,", 11), ",")[:11]
	for _, c := range []struct {
		in []string
		ok bool
	}{
		{nil, true},
		{[]string{"203.0.113.1", "8.8.8.8"}, true},
		{[]string{"10.0.0.53"}, true}, // private: the firewall decides (an operator may allow it)
		{[]string{"127.0.0.1"}, false},
		{[]string{"169.254.169.254"}, false},
		{[]string{"0.0.0.0"}, false},
		{[]string{"224.0.0.251"}, false},
		{[]string{"255.255.255.255"}, false},
		{[]string{"2001:db8::53"}, false},
		{[]string{"dns.example.com"}, false},
		{[]string{"203.0.113.1", "203.0.113.1"}, false},
		{eleven, false},
	} {
		_, err := ParseDNSServers(c.in)
		if c.ok != (err == nil) || err != nil && !errs.Is(err, errs.InvalidArgument) {
			t.Errorf("%q: %v", c.in, err)
		}
	}
}
