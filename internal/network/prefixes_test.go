package network

import (
	"net/netip"
	"testing"
)

func TestBlockedRanges(t *testing.T) {
	tests := []struct {
		name    string
		allow   []string
		blocked []string // must be blocked
		open    []string // must not be
	}{
		{"defaults", nil, []string{"10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "127.0.0.1", "100.64.0.1"}, []string{"1.1.1.1"}},
		{"operator allows 10/8", []string{"10.0.0.0/8"}, []string{"192.168.1.1", "169.254.169.254"}, []string{"10.1.2.3"}},
		{"allowing link-local does not", []string{"169.254.0.0/16", "127.0.0.0/8"}, []string{"169.254.169.254", "127.0.0.1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			for _, a := range tc.allow {
				cfg.Allow = append(cfg.Allow, netip.MustParsePrefix(a))
			}
			ranges, err := blockedRanges(cfg)
			if err != nil {
				t.Fatal(err)
			}
			in := func(s string) bool {
				for _, p := range ranges {
					if p.Contains(netip.MustParseAddr(s)) {
						return true
					}
				}
				return false
			}
			for _, a := range tc.blocked {
				if !in(a) {
					t.Errorf("%s is not blocked", a)
				}
			}
			for _, a := range tc.open {
				if in(a) {
					t.Errorf("%s is blocked", a)
				}
			}
		})
	}
}

func TestIntervalsMergeAndEnd(t *testing.T) {
	got := intervals([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("240.0.0.0/4")})
	// 10/8 swallows 10.1/16; 240/4 reaches the top and has no end mark.
	if len(got) != 3 || !got[1].IntervalEnd || got[2].IntervalEnd {
		t.Errorf("intervals: %+v", got)
	}
}
