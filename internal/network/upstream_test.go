package network

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEgressProxyForms: egressProxy.tls as E2B's API gives it, and what
// Check refuses.
func TestEgressProxyForms(t *testing.T) {
	for _, c := range []struct {
		body    string
		tls     *ProxyTLS
		refused string // in Check's error; "" accepted
	}{
		{`{"address":"a.test:1080"}`, nil, ""},
		{`{"address":"a.test:1080","tls":null}`, nil, ""},
		{`{"address":"a.test:1080","tls":false}`, nil, ""},
		{`{"address":"a.test:1080","tls":true}`, &ProxyTLS{}, ""},
		{`{"address":"a.test:1080","tls":{"serverName":"p.test"}}`, &ProxyTLS{ServerName: "p.test"}, ""},
		{`{"address":"a.test:1080","tls":{"enabled":true,"serverName":"p.test"}}`, &ProxyTLS{ServerName: "p.test"}, ""},
		{`{"address":"a.test:1080","tls":{"enabled":false,"serverName":"p.test"}}`, nil, ""},
		{`{"address":"a.test:1080","tls":{"serverName":"` + strings.Repeat("n", 254) + `"}}`, &ProxyTLS{ServerName: strings.Repeat("n", 254)}, "serverName"},
		{`{"address":"a.test:1080","tls":{"caCert":"not a certificate"}}`, &ProxyTLS{CACert: "not a certificate"}, "no PEM certificate"},
		{`{"address":"a.test:1080","tls":{"caCert":"` + strings.Repeat("x", 8193) + `"}}`, &ProxyTLS{CACert: strings.Repeat("x", 8193)}, "8192"},
	} {
		var e EgressProxy
		if err := json.Unmarshal([]byte(c.body), &e); err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if (e.TLS == nil) != (c.tls == nil) || e.TLS != nil && *e.TLS != *c.tls {
			t.Errorf("%.80s: tls %+v, want %+v", c.body, e.TLS, c.tls)
		}
		err := e.Check()
		if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
			t.Errorf("%.80s: Check %v, want refused for %q", c.body, err, c.refused)
		}
	}
	var e EgressProxy
	if err := json.Unmarshal([]byte(`{"address":"a.test:1080","tls":"yes"}`), &e); err == nil {
		t.Error(`tls "yes" was taken`)
	}
	// What a node keeps reads back the same.
	in := EgressProxy{Address: "a.test:1080", TLS: &ProxyTLS{ServerName: "p.test", CACert: "-----BEGIN CERTIFICATE-----\n(kept as given)\n-----END CERTIFICATE-----\n"}}
	b, _ := json.Marshal(in)
	var out EgressProxy
	if err := json.Unmarshal(b, &out); err != nil || out.TLS == nil || *out.TLS != *in.TLS {
		t.Errorf("round trip of %s: %+v %v", b, out, err)
	}
}
