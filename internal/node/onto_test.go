package node

import (
	"reflect"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/tokens"
)

// TestOnto: what a create asks of its sandbox reaches its record the
// same way cold or warm (onto). Every field of CreateRequest is either
// set by onto, checked below, or listed with where else it goes: a field
// added to the request fails the test until it is one or the other.
func TestOnto(t *testing.T) {
	elsewhere := map[string]string{
		"ID":            "Create names the sandbox (a warm one has its id)",
		"Template":      "resolved to the template: Info.TemplateID, BuildID, Layers",
		"Resolved":      "the same, for builds",
		"BuildID":       "the same",
		"Limits":        "checked against the template's (limitsFor): Info.Limits",
		"Sized":         "the same",
		"NoInternet":    "the network (CreateRequest.network): Info.Network",
		"AllowOut":      "the same",
		"DenyOut":       "the same",
		"AllowDomains":  "the same",
		"Rules":         "the same",
		"EgressProxy":   "the same",
		"Tokens":        "the same",
		"DNSServers":    "the same",
		"Isolation":     "the driver (driverNamed): Info.Isolation",
		"Quota":         "admission (admitLocked), not kept",
		"Saved":         "the layers the sandbox starts from: Info.Layers",
		"Layers":        "the same",
		"Image":         "the processes it runs on from (launch)",
		"Volumes":       "bound at launch: Info.Volumes (cold only: a warm sandbox mounts none)",
		"Node":          "a cluster's placement; a node ignores it",
		"Secure":        "with DeriveTokens: which tokens are derived",
		"PublicTraffic": "the same",
	}
	req := CreateRequest{
		Team: "team", Timeout: time.Minute, Metadata: map[string]string{"m": "v"}, EnvVars: map[string]string{"A": "1"},
		AccessToken: "given", TrafficToken: "given",
		Settings: sandboxes.Settings{MaskRequestHost: "example.com:${PORT}", HTTPSPorts: []int{8443}, AutoPause: true, AutoResume: true, AutoPauseFiles: true},
	}
	v := reflect.ValueOf(req)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if _, ok := elsewhere[name]; ok == !v.Field(i).IsZero() && name != "DeriveTokens" {
			t.Errorf("CreateRequest.%s: set it in this test, so that onto is checked to carry it, or say where else it goes", name)
		}
	}
	now := time.Unix(1e9, 0).UTC()
	info := Info{ID: "i1"}
	onto(req, &info, map[string]string{"A": "template", "B": "template"}, []byte("secret"), now)
	want := Info{ID: "i1", Team: "team", StartedAt: now, EndAt: now.Add(time.Minute), Timeout: time.Minute,
		Metadata: map[string]string{"m": "v"}, EnvVars: map[string]string{"A": "1", "B": "template"},
		AccessToken: "given", TrafficToken: "given", Settings: req.Settings}
	if !reflect.DeepEqual(info, want) {
		t.Errorf("onto:\n got %+v\nwant %+v", info, want)
	}
	// Derived tokens replace those given: the agent's when secure, the
	// ports' unless public.
	req.DeriveTokens, req.Secure, req.PublicTraffic = true, true, false
	onto(req, &info, nil, []byte("secret"), now)
	access, traffic := tokens.Sandbox([]byte("secret"), "i1", true, false)
	if info.AccessToken != access || info.TrafficToken != traffic || access == "" || traffic == "" {
		t.Errorf("derived tokens: %q %q, want %q %q", info.AccessToken, info.TrafficToken, access, traffic)
	}
}
