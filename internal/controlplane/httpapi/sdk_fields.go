package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/covesandbox/cove/internal/errs"
)

// FieldUse is what Cove does with a field of a request E2B's SDK sends.
type FieldUse string

const (
	// Served: the field does what E2B's API says.
	Served FieldUse = "served"
	// Refused: Cove does not serve it yet; a request that gives it a value
	// is answered 400, naming it (notServed), never silently ignored.
	Refused FieldUse = "refused"
)

// SDKFields lists, for each schema of E2B's API whose requests reach Cove
// (create, connect, resume, pause, snapshot, list, network), what Cove
// does with each of its fields. test/compat's TestSDKRequestFields reads
// the official SDKs' schemas (the JS SDK's typings, the Python SDK's
// request models) and fails on a field this table does not decide, or on
// one it names that neither SDK has. "GET /v2/sandboxes" is the list's
// query parameters.
var SDKFields = map[string]map[string]FieldUse{
	"NewSandbox":   newSandboxFields(true),
	"NewSandboxV2": newSandboxFields(false),
	// dnsServers (Python 2.63): the sandbox's /etc/resolv.conf names them
	// instead of the node's resolvers; its egress rules apply to them.
	"SandboxNetworkConfig": {
		"allowOut": Served, "denyOut": Served, "allowPublicTraffic": Served, "maskRequestHost": Served,
		"egressProxy": Served, "httpsPorts": Served, "rules": Served, "dnsServers": Served,
	},
	"SandboxNetworkUpdateConfig": {
		"allow_internet_access": Served, "allowOut": Served, "denyOut": Served,
		"egressProxy": Served, "rules": Served, "dnsServers": Served,
	},
	// requireHealthyGuest (Python 2.63's strict pause) refuses the pause
	// while the agent does not answer.
	"SandboxPauseRequest":     {"memory": Served, "requireHealthyGuest": Served},
	"SandboxSnapshotRequest":  {"memory": Served, "name": Served},
	"SandboxAutoResumeConfig": {"enabled": Served},
	"SandboxVolumeMount":      {"name": Served, "path": Served},
	// onResume (2.66): its action (reboot is memory false) and its sizes,
	// which a paused sandbox resumes with; beside it, the same sizes. A
	// connect to a running sandbox leaves its size alone (E2B's rule).
	"ConnectSandbox":   connectFields(),
	"ConnectSandboxV2": connectFields(),
	// The deprecated resume: a sandbox keeps the lifecycle of its create;
	// cpuCount (Python 2.64's model; no SDK sends it: their resume is
	// connect) is the CPUs it resumes with, as onResume's.
	"ResumedSandbox": {"memory": Served, "timeout": Served, "autoPause": Refused, "cpuCount": Served},
	"GET /v2/sandboxes": {
		"limit": Served, "metadata": Served, "nextToken": Served, "order": Served,
		"startedAfter": Served, "state": Served, "template": Served,
	},
}

// NewerSDKFields are fields of SDKFields that E2B's SDKs send from
// releases newer than those the tests install (npm serves e2b up to 2.51,
// PyPI up to 2.64): the release that added each, from E2B's release
// notes. TestSDKRequestFields takes them while no installed SDK has them
// and fails once one does (the entry then goes).
var NewerSDKFields = map[string]map[string]string{
	"NewSandbox":       {"memoryMB": "2.66"},
	"NewSandboxV2":     {"memoryMB": "2.66"},
	"ConnectSandbox":   newerConnectFields(),
	"ConnectSandboxV2": newerConnectFields(),
}

func connectFields() map[string]FieldUse {
	return map[string]FieldUse{"memory": Served, "timeout": Served, "onResume": Served,
		"onResume.memoryMB": Served, "onResume.cpuCount": Served, "memoryMB": Served, "cpuCount": Served}
}

func newerConnectFields() map[string]string {
	return map[string]string{"onResume": "2.66", "onResume.memoryMB": "2.66", "onResume.cpuCount": "2.66",
		"memoryMB": "2.66", "cpuCount": "2.66"}
}

func newSandboxFields(v1 bool) map[string]FieldUse {
	m := map[string]FieldUse{
		"templateID": Served, "timeout": Served, "metadata": Served, "envVars": Served,
		"allow_internet_access": Served, "network": Served, "autoPause": Served, "autoPauseMemory": Served,
		"autoResume": Served, "volumeMounts": Served,
		"iam": Served, "mcp": Refused, "cpuCount": Served, "memoryMB": Served,
	}
	if v1 {
		m["secure"] = Served
	}
	return m
}

// rawField is a request's field Cove does not serve, as it came.
type rawField struct {
	name string
	raw  json.RawMessage
}

// notServed refuses the first of fields that carries a value: null, {}
// and [] carry none.
func notServed(fields ...rawField) error {
	for _, f := range fields {
		switch string(bytes.TrimSpace(f.raw)) {
		case "", "null", "{}", "[]":
			continue
		}
		return errs.New(errs.InvalidArgument, "%s is not supported by Cove yet", f.name)
	}
	return nil
}
