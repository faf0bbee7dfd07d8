package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/covesandbox/cove/internal/ids"
)

// Sandbox lifecycle event types (E2B's).
const (
	EventCreated      = "sandbox.lifecycle.created"
	EventUpdated      = "sandbox.lifecycle.updated"
	EventKilled       = "sandbox.lifecycle.killed"
	EventPaused       = "sandbox.lifecycle.paused"
	EventResumed      = "sandbox.lifecycle.resumed"
	EventCheckpointed = "sandbox.lifecycle.checkpointed"
)

// EventTypes are every type, in their lifecycle's order.
var EventTypes = []string{EventCreated, EventUpdated, EventPaused, EventResumed, EventCheckpointed, EventKilled}

// Why an event happened (its eventData.reason).
const (
	ReasonAPI       = "api"       // a request through the API
	ReasonTimeout   = "timeout"   // the sandbox's timeout
	ReasonAutoPause = "autopause" // its timeout, with auto-pause
	ReasonTraffic   = "traffic"   // auto-resume, by traffic to it
)

// Event is a sandbox's lifecycle event, kept for the events API and
// delivered to the team's webhooks. Body is the event as both serve it.
type Event struct {
	ID, Type, Team, SandboxID string
	Time                      time.Time
	Body                      []byte
	// Template is the sandbox's template: a created event counts a spawn
	// of it (TemplateSpawns), in the event's transaction. Not kept.
	Template string
}

// Spawns are how many sandboxes a template started (created events
// recorded) and when the last one did.
type Spawns struct {
	Count int64
	Last  time.Time
}

// eventBody is E2B's event (version v2); Cove's eventData carries the
// reason too.
type eventBody struct {
	Version     string    `json:"version"`
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	EventData   eventData `json:"eventData"`
	BuildID     string    `json:"sandboxBuildId"`
	ExecutionID string    `json:"sandboxExecutionId"`
	SandboxID   string    `json:"sandboxId"`
	TeamID      string    `json:"sandboxTeamId"`
	TemplateID  string    `json:"sandboxTemplateId"`
	Timestamp   time.Time `json:"timestamp"`
}

type eventData struct {
	// Metadata is the sandbox's metadata, a JSON object: always on the
	// wire, not in the stored form (SplitEvent).
	Metadata  json.RawMessage `json:"sandbox_metadata,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Execution *execution      `json:"execution,omitempty"`
}

type execution struct {
	StartedAt     time.Time `json:"started_at"`
	VCPUCount     int       `json:"vcpu_count"`
	MemoryMB      int       `json:"memory_mb"`
	ExecutionTime int64     `json:"execution_time"` // ms
}

// NewEvent is a sandbox's event of type typ at at, for reason. An end or a
// pause carries how long the sandbox ran.
func NewEvent(sb Sandbox, typ, reason string, at time.Time) Event {
	at = at.UTC()
	e := Event{ID: ids.UUID(), Type: typ, Team: sb.Team, SandboxID: sb.ID, Time: at, Template: sb.TemplateID}
	b := eventBody{Version: "v2", ID: e.ID, Type: typ, SandboxID: sb.ID, TeamID: sb.Team, TemplateID: sb.TemplateID,
		ExecutionID: sb.ID + "-" + sb.StartedAt.UTC().Format("20060102T150405.000000000Z"), Timestamp: at,
		EventData: eventData{Reason: reason}}
	b.EventData.Metadata = []byte("{}")
	if len(sb.Metadata) > 0 {
		b.EventData.Metadata, _ = json.Marshal(sb.Metadata) // keys sorted: one form for one content
	}
	if typ == EventKilled || typ == EventPaused {
		b.EventData.Execution = &execution{StartedAt: sb.StartedAt.UTC(), VCPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB,
			ExecutionTime: at.Sub(sb.StartedAt).Milliseconds()}
	}
	e.Body, _ = json.Marshal(b) // of plain fields: cannot fail
	return e
}

// SplitEvent is how an event's body is stored: bare, the body without
// its sandbox metadata, and the metadata with its sum (SHA-256), stored
// once for every event of its team that carries the same ("" and nil
// for none). JoinEvent puts them back together.
func SplitEvent(body []byte) (bare, metadata []byte, sum string, err error) {
	var b eventBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, nil, "", fmt.Errorf("read event: %w", err)
	}
	metadata, b.EventData.Metadata = b.EventData.Metadata, nil
	if bare, err = json.Marshal(b); err != nil {
		return nil, nil, "", fmt.Errorf("store event: %w", err)
	}
	if len(metadata) == 0 || string(metadata) == "{}" {
		return bare, nil, "", nil
	}
	h := sha256.Sum256(metadata)
	return bare, metadata, hex.EncodeToString(h[:]), nil
}

// JoinEvent is the body SplitEvent split: bare with metadata (nil: {},
// or what bare carries itself, as bodies stored whole before 2026-12
// do).
func JoinEvent(bare, metadata []byte) ([]byte, error) {
	var b eventBody
	if err := json.Unmarshal(bare, &b); err != nil {
		return nil, fmt.Errorf("read stored event: %w", err)
	}
	switch {
	case metadata != nil:
		b.EventData.Metadata = metadata
	case b.EventData.Metadata == nil:
		b.EventData.Metadata = []byte("{}")
	}
	return json.Marshal(b)
}

// EventQuery selects a team's events: one sandbox's ("" = all), of
// Types (none = all), a page from Offset of at most Limit, oldest first
// when Ascending.
type EventQuery struct {
	Team, SandboxID string
	Types           []string
	Offset, Limit   int
	Ascending       bool
}

// Webhook is where a team's events of some types are delivered.
type Webhook struct {
	ID, Team, Name, URL string
	Enabled             bool
	Events              []string
	// Secret is the stored form of the secret that signs each delivery
	// ("" = unsigned; the service seals it): never shown.
	Secret    string
	CreatedAt time.Time
}

// Delivery is an event on its way to a webhook: kept until the receiver
// takes it (at least once), tried again at NextAt.
type Delivery struct {
	ID, WebhookID, EventID string
	Team                   string // the webhook's
	Attempt                int
	NextAt                 time.Time
	LastError              string // why the last attempt failed
	// What the sender needs, from the webhook and the event.
	URL, Secret string
	Body        []byte
}
