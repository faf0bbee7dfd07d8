package service

import (
	"net/netip"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
)

func TestWebhookAddrAllowed(t *testing.T) {
	s := New(Config{
		WebhookAllow:  []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("100.80.0.0/16")},
		SandboxRanges: func() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("100.80.0.0/16")} },
		NodeAddrs:     func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("203.0.113.9")} },
	}, nil, nil, nil, logx.Discard())
	for addr, ok := range map[string]bool{
		"203.0.113.7":     true,
		"10.9.1.2":        true,  // allowed by the operator
		"10.1.2.3":        false, // private
		"127.0.0.1":       false,
		"169.254.169.254": false,
		"::ffff:10.1.2.3": false,
		"198.18.0.6":      false, // the default sandbox range, though listed in WebhookAllow
		"198.19.255.2":    false,
		"100.80.3.4":      false, // a node's own range, though listed too
		"203.0.113.9":     false, // a node's own address
		"100.64.1.1":      false, // CGNAT
	} {
		err := s.webhookAddrAllowed(netip.MustParseAddr(addr))
		if (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", addr, err, ok)
		}
	}
}
