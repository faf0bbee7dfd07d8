package nodeapi

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/svid"
)

// TestCreateRequestCrosses: every field of a create crosses the node API
// as it was, but those listed here, which do not cross or cross another
// way. A field added to sandboxes.CreateRequest fails the test until it is
// set below (and so crosses) or listed.
func TestCreateRequestCrosses(t *testing.T) {
	notHere := map[string]string{
		"Resolved": "a template in the making is the node's own",
		"Quota":    "a cluster's replicas admit over every node; nodes keep their own flags",
		"Saved":    "crosses with the node's layer paths (savedToPB, Server.savedFromPB)",
		"Layers":   "the same",
		"Image":    "the same",
	}
	in := sandboxes.CreateRequest{
		ID: "isandbox", Template: "tpl", BuildID: "build", Timeout: time.Minute,
		Limits: isolation.Limits{CPUMillis: 2000, MemoryMB: 512, DiskMB: 1024, PIDs: 100}, Sized: true,
		EnvVars: map[string]string{"A": "1"}, Metadata: map[string]string{"m": "v"},
		AccessToken: "access", TrafficToken: "traffic", DeriveTokens: true, Secure: true, PublicTraffic: true,
		NoInternet: true, AllowOut: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, DenyOut: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
		AllowDomains: []string{"example.com"},
		Rules:        network.Rules{"example.com": {{Transform: &network.Transform{Headers: map[string]string{"A": "b"}}}}},
		EgressProxy:  &network.EgressProxy{Address: "p.test:1080", Username: "u", Password: "p", TLS: &network.ProxyTLS{ServerName: "p.test", CACert: "PEM"}},
		Tokens:       map[string]svid.Token{"aws": {Audience: "sts", TokenType: svid.TokenType}},
		Isolation:    "gvisor", Team: "team", Settings: allSettings(t),
		Volumes: []sandboxes.VolumeMount{{ID: "vol", Name: "data", Path: "/data"}}, Node: "n1",
		DNSServers: []netip.Addr{netip.MustParseAddr("198.51.100.53")},
	}
	v := reflect.ValueOf(in)
	for i := range v.NumField() {
		if f := v.Type().Field(i); notHere[f.Name] == "" && v.Field(i).IsZero() {
			t.Errorf("sandboxes.CreateRequest.%s is not set in this test: set it, so that it crosses, or say why it does not", f.Name)
		}
	}
	pb, err := createToPB(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := createFromPB(pb)
	if err != nil {
		t.Fatal(err)
	}
	out.Node = in.Node // the node it reached, not a field on the wire
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if notHere[name] != "" {
			continue
		}
		if got, want := reflect.ValueOf(out).Field(i).Interface(), v.Field(i).Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s crossed as %#v, want %#v", name, got, want)
		}
	}
}

// allSettings are settings with every field set: a field added to
// sandboxes.Settings fails the tests that cross them until it is set here.
func allSettings(t *testing.T) sandboxes.Settings {
	s := sandboxes.Settings{MaskRequestHost: "localhost:${PORT}", HTTPSPorts: []int{8443}, AutoPause: true, AutoResume: true, AutoPauseFiles: true}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("sandboxes.Settings.%s is not set in allSettings: set it, so that the tests see it cross", v.Type().Field(i).Name)
		}
	}
	return s
}

// TestSettingsCross: a sandbox's settings cross the node API in its
// record as in its create (TestCreateRequestCrosses), whole.
func TestSettingsCross(t *testing.T) {
	in := sandboxes.Info{ID: "i1", State: sandboxes.StateRunning, Settings: allSettings(t)}
	out, err := infoFromPB(infoToPB(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Settings, in.Settings) {
		t.Errorf("a record's settings crossed as %+v, want %+v", out.Settings, in.Settings)
	}
}

// TestUnresponsiveCrosses: that a paused sandbox's agent did not answer
// at its pause reaches the API replicas (GET's envdUnresponsiveAtPause,
// and a resume with its memory refused).
func TestUnresponsiveCrosses(t *testing.T) {
	for _, mark := range []bool{false, true} {
		in := sandboxes.Info{ID: "i1", State: sandboxes.StatePaused, Rest: sandboxes.Rest{Phase: sandboxes.PhasePaused, Unresponsive: mark}}
		out, err := infoFromPB(infoToPB(in))
		if err != nil {
			t.Fatal(err)
		}
		if out.Rest.Unresponsive != mark {
			t.Errorf("unresponsive %t crossed as %t", mark, out.Rest.Unresponsive)
		}
	}
}
