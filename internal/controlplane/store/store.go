// Package store defines the control plane's state: API keys, the server
// secret and the sandboxes the API has handed out. Implementations:
// sqlite (embedded, the default) and postgres (shared by API replicas);
// storetest is the suite both pass.
package store

import (
	"context"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
	"github.com/covesandbox/cove/internal/volume"
)

// APIKey is a stored key: only its hash is kept, and what a listing shows
// of it.
type APIKey struct {
	Hash      string // hex SHA-256 of the key
	Team      string // the team's id
	Name      string
	CreatedAt time.Time
	// Mask is the first 2 and the last 4 characters of the key after its
	// "e2b_" ("" for keys made before it was kept).
	Mask string
	// LastUsed is when the key last authenticated a request, to a minute
	// (zero: never).
	LastUsed time.Time
}

// Masked shows what is kept of a key: e2b_ab…wxyz (e2b_… for a key made
// before its mask was kept).
func (k APIKey) Masked() string {
	if len(k.Mask) != 6 {
		return "e2b_…"
	}
	return "e2b_" + k.Mask[:2] + "…" + k.Mask[2:]
}

// ID is a key's identifier in the key API: the first 128 bits of its
// hash, in a UUID's form.
func (k APIKey) ID() string {
	h := k.Hash
	if len(h) < 32 {
		return h
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Team is a team: its sandboxes, templates, volumes and keys are its own.
type Team struct {
	ID        string // what records name it by
	Name      string // unique
	CreatedAt time.Time
	// Quota's fields, when above 0, replace the server's quotas for the
	// team (its --team-max-* flags).
	Quota Quota
}

// Quota is a team's own quota: sandboxes running at once, the CPUs,
// memory and disk they hold together, its templates' layer storage; 0 is
// the server's.
type Quota struct {
	MaxSandboxes, MaxCPUs                int
	MaxMemoryMB, MaxDiskMB, MaxStorageMB int64
}

// TeamQuota changes a team's quota; nil fields stay.
type TeamQuota struct {
	MaxSandboxes, MaxCPUs                *int
	MaxMemoryMB, MaxDiskMB, MaxStorageMB *int64
}

// Apply returns to with q's fields set.
func (q TeamQuota) Apply(to Quota) Quota {
	for _, f := range []struct {
		to   *int
		from *int
	}{{&to.MaxSandboxes, q.MaxSandboxes}, {&to.MaxCPUs, q.MaxCPUs}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	for _, f := range []struct {
		to   *int64
		from *int64
	}{{&to.MaxMemoryMB, q.MaxMemoryMB}, {&to.MaxDiskMB, q.MaxDiskMB}, {&to.MaxStorageMB, q.MaxStorageMB}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	return to
}

// Set is what q sets, as columns and values, in a fixed order.
func (q TeamQuota) Set() (columns []string, values []any) {
	for _, f := range []struct {
		col string
		i   *int
		i64 *int64
	}{{"max_sandboxes", q.MaxSandboxes, nil}, {"max_cpus", q.MaxCPUs, nil}, {"max_memory_mb", nil, q.MaxMemoryMB},
		{"max_disk_mb", nil, q.MaxDiskMB}, {"max_storage_mb", nil, q.MaxStorageMB}} {
		switch {
		case f.i != nil:
			columns, values = append(columns, f.col), append(values, *f.i)
		case f.i64 != nil:
			columns, values = append(columns, f.col), append(values, *f.i64)
		}
	}
	return columns, values
}

// Sandbox is the API's record of a sandbox.
type Sandbox struct {
	ID                  string
	Team                string
	TemplateID          string
	Alias               string
	State               sandboxes.State // running or paused
	StartedAt           time.Time
	EndAt               time.Time
	CPUCount            int
	MemoryMB            int
	DiskMB              int
	Metadata            map[string]string
	AllowInternetAccess *bool
	AutoPause           bool
	AutoResume          bool // a paused sandbox resumes on traffic
	Secure              bool
	EnvdVersion         string
	// PublicTraffic false: the sandbox's ports need the traffic token.
	PublicTraffic bool
	// Isolation is the driver the sandbox runs on ("namespaces", "gvisor", "microvm").
	Isolation string
	// Node runs the sandbox ("" on a server that is its own node).
	Node string
	// Answer, when set, is recorded as its Idempotency-Key's answer with
	// the sandbox, in one transaction (not read back).
	Answer *IdempotentAnswer
}

// ListFilter selects sandboxes of one team.
type ListFilter struct {
	Team     string
	States   []sandboxes.State // empty = any
	Metadata map[string]string // every pair must match
	// Templates: the sandbox's template id or name is one of these (empty
	// = any).
	Templates []string
	// StartedAfter and StartedBefore bound the start time, both inclusive
	// (zero = unbounded).
	StartedAfter, StartedBefore time.Time
	// After continues a listing: sandboxes strictly after this position in
	// (StartedAt, ID) order (descending unless Ascending).
	After     *Cursor
	Ascending bool
	Limit     int
}

// Cursor is a position in a listing.
type Cursor struct {
	StartedAt time.Time
	ID        string
}

// SandboxLog is one line of a sandbox's log.
type SandboxLog struct {
	SandboxID string
	Team      string
	Time      time.Time
	Level     string // "debug", "info", "warn" or "error"
	Message   string
	Fields    map[string]string
}

// LogQuery selects lines of one team's sandbox's log.
type LogQuery struct {
	SandboxID, Team string
	// Cursor is where the lines start, inclusive: forward from it (zero:
	// the first line), or backward from it (zero: the last line).
	Cursor   time.Time
	Backward bool
	Levels   []string // empty = any
	Search   string   // a case-sensitive substring of the message
	Limit    int
}

// The log line of a sandbox whose node was lost while it ran.
const (
	LostMessage    = "sandbox ended"
	ReasonNodeLost = "node lost"
)

// Store is what the control plane keeps.
type Store interface {
	// AddAPIKey stores a key (again: nothing changes); its team is made,
	// named by its id, when it has no record.
	AddAPIKey(ctx context.Context, k APIKey) error
	APIKey(ctx context.Context, hash string) (APIKey, error) // errs.NotFound
	CountAPIKeys(ctx context.Context) (int, error)
	// TeamAPIKeys are a team's keys, oldest first.
	TeamAPIKeys(ctx context.Context, team string) ([]APIKey, error)
	DeleteAPIKey(ctx context.Context, team, hash string) error // errs.NotFound
	// RenameAPIKey renames a team's key (errs.NotFound).
	RenameAPIKey(ctx context.Context, team, hash, name string) error
	// TouchAPIKey records that a key authenticated a request at t.
	TouchAPIKey(ctx context.Context, hash string, t time.Time) error

	// AddTeam records a team (errs.AlreadyExists when its name or id is
	// taken).
	AddTeam(ctx context.Context, t Team) error
	// Team finds a team by id, else by name (errs.NotFound).
	Team(ctx context.Context, ref string) (Team, error)
	// Teams are every team, oldest first.
	Teams(ctx context.Context) ([]Team, error)
	// SetTeamQuota changes a team's quotas (errs.NotFound).
	SetTeamQuota(ctx context.Context, id string, q TeamQuota) error
	// DeleteTeam removes a team and its records (keys, secrets, webhooks,
	// events, idempotency keys, sandbox logs): errs.Conflict while records
	// of its sandboxes remain.
	DeleteTeam(ctx context.Context, id string) error

	// Secret returns the named secret, storing gen()'s value on first use.
	Secret(ctx context.Context, name string, gen func() ([]byte, error)) ([]byte, error)

	// AddTeamSecret records a team's secret (errs.AlreadyExists when the
	// team has one so named).
	AddTeamSecret(ctx context.Context, s TeamSecret) error
	// TeamSecret finds a team's secret by id, else by name (errs.NotFound).
	TeamSecret(ctx context.Context, team, ref string) (TeamSecret, error)
	// TeamSecrets lists a team's secrets by name, from the first named
	// after after, at most limit.
	TeamSecrets(ctx context.Context, team, after string, limit int) ([]TeamSecret, error)
	// UpdateTeamSecret stores a new sealed value as the secret's next
	// version, and its metadata unless nil (errs.NotFound).
	UpdateTeamSecret(ctx context.Context, team, id string, sealed []byte, metadata map[string]string, at time.Time) (TeamSecret, error)
	// DeleteTeamSecret removes a team's secret, every version (errs.NotFound).
	DeleteTeamSecret(ctx context.Context, team, id string) error

	// AddEvent records a lifecycle event and, for each of its team's
	// enabled webhooks that asks for its type, a delivery due now.
	AddEvent(ctx context.Context, e Event) error
	// Events returns the events q selects, newest first unless Ascending.
	Events(ctx context.Context, q EventQuery) ([]Event, error)
	// TemplateSpawns are the spawns of every template that had one, by
	// template id: counted as their created events are added, and kept
	// when those are pruned.
	TemplateSpawns(ctx context.Context) (map[string]Spawns, error)
	// PruneEvents removes events older than before (deliveries with them).
	PruneEvents(ctx context.Context, before time.Time) error
	// AddWebhook records a team's webhook.
	AddWebhook(ctx context.Context, w Webhook) error
	// Webhook finds a team's webhook (errs.NotFound).
	Webhook(ctx context.Context, team, id string) (Webhook, error)
	// TeamWebhooks are a team's webhooks, oldest first.
	TeamWebhooks(ctx context.Context, team string) ([]Webhook, error)
	// UpdateWebhook stores a team's webhook as w (errs.NotFound).
	UpdateWebhook(ctx context.Context, w Webhook) error
	// DeleteWebhook removes a team's webhook and what is on its way to it
	// (errs.NotFound).
	DeleteWebhook(ctx context.Context, team, id string) error
	// ClaimDeliveries takes up to limit deliveries due at now and moves
	// them lease on, so that no other sender takes them meanwhile.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	// FinishDelivery forgets a delivery (taken, or given up).
	FinishDelivery(ctx context.Context, id string) error
	// RetryDelivery counts a failed attempt, keeps why it failed and
	// makes it due at next.
	RetryDelivery(ctx context.Context, id string, next time.Time, why string) error
	// WebhookDeliveries are the deliveries a team's webhook has still to
	// take, by when they are due (errs.NotFound for no such webhook).
	WebhookDeliveries(ctx context.Context, team, webhookID string) ([]Delivery, error)

	InsertSandbox(ctx context.Context, s Sandbox) error // errs.AlreadyExists
	Sandbox(ctx context.Context, id string) (Sandbox, error)
	SetSandboxEnd(ctx context.Context, id string, end time.Time) error
	// SetSandboxSize records a sandbox's CPUs and memory: the size it
	// resumed with (E2B's onResume sizes).
	SetSandboxSize(ctx context.Context, id string, cpuCount, memoryMB int) error
	// SetSandboxState records a sandbox's state (running, paused) and end.
	SetSandboxState(ctx context.Context, id string, state sandboxes.State, end time.Time) error
	// DeleteSandbox removes a record and reports whether there was one (a
	// missing one is no error).
	DeleteSandbox(ctx context.Context, id string) (bool, error)
	// ListSandboxes returns one page and the total of matching sandboxes.
	ListSandboxes(ctx context.Context, f ListFilter) ([]Sandbox, error)
	// AllSandboxIDs returns every recorded id (for reconciling with nodes).
	AllSandboxIDs(ctx context.Context) ([]string, error)

	// AddSandboxLog appends a line to a sandbox's log, with the lifecycle
	// events it records (AddEvent's), in one transaction; the log outlives
	// the sandbox's record until PruneSandboxLogs.
	AddSandboxLog(ctx context.Context, l SandboxLog, events ...Event) error
	// SandboxLogs returns the lines q selects, in q's direction.
	SandboxLogs(ctx context.Context, q LogQuery) ([]SandboxLog, error)
	// PruneSandboxLogs removes the lines older than before.
	PruneSandboxLogs(ctx context.Context, before time.Time) error

	Idempotency

	// AppendBuildLog stores entries of a template build's log, the first
	// at place from (a place taken twice is an error).
	AppendBuildLog(ctx context.Context, buildID string, from int, entries []template.LogEntry) error
	// BuildLog returns the page of a build's log p selects.
	BuildLog(ctx context.Context, buildID string, p template.LogPage) ([]template.LogEntry, error)
	// BuildLogBytes is what the logs of builds hold, each entry counted as
	// its message and template.LogEntryOverhead.
	BuildLogBytes(ctx context.Context, buildIDs []string) (int64, error)
	// DeleteBuildLogs removes the logs of builds.
	DeleteBuildLogs(ctx context.Context, buildIDs []string) error
	// PruneBuildLogs removes the logs of builds whose last entry is older
	// than age.
	PruneBuildLogs(ctx context.Context, age time.Duration) error

	// SetLimits sets the bounds of each team's records (DefaultLimits
	// until it is called, and for its fields that are 0); call it before
	// the store is used.
	SetLimits(l Limits)

	Close() error
}

// TeamSecret is a team's secret as stored: its value sealed with the
// operator's key (internal/secrets), never in the clear.
type TeamSecret struct {
	ID, Team, Name       string
	Version              int64 // 1 for a new secret, one more at each update
	Metadata             map[string]string
	Sealed               []byte
	CreatedAt, UpdatedAt time.Time
}

// TeamUse is what a team's recorded sandboxes hold together.
type TeamUse struct {
	Sandboxes, CPUs  int
	MemoryMB, DiskMB int64
}

// Admitting is a store that records a sandbox only if its team may add
// it (PostgreSQL: a cluster's replicas admit against every node's
// sandboxes, one team's creates at a time).
type Admitting interface {
	// InsertSandboxAdmitted records s if admit, given what its team's
	// other records hold, lets it (else admit's error, nothing recorded).
	InsertSandboxAdmitted(ctx context.Context, s Sandbox, admit func(TeamUse) error) error
	// SetSandboxSizeAdmitted is SetSandboxSize if admit, given what the
	// team's other records hold (the sandbox's own aside), lets it.
	SetSandboxSizeAdmitted(ctx context.Context, id, team string, cpuCount, memoryMB int, admit func(TeamUse) error) error
}

// StorageHolds is a store that keeps what teams' snapshots in progress
// hold of their storage quota where every API replica sees it
// (PostgreSQL: a cluster's), so that snapshots made through different
// replicas at once never pass a team's quota together.
type StorageHolds interface {
	// HoldStorage holds n bytes of team's storage for the job id (its hold
	// changed to n when it has one) until ttl from now, if admit, given
	// what the team's other holds add up to, lets it (else admit's error,
	// nothing changed), and if the templates' records are still at
	// generation gen (else ErrRecordsChanged: what admit was told of the
	// team's stored templates may miss one whose hold went meanwhile).
	// One team's holds are taken one at a time.
	HoldStorage(ctx context.Context, team, id string, n int64, ttl time.Duration, gen int64, admit func(held int64) error) error
	// ReleaseStorage lets a job's hold go (an unknown one is no error).
	ReleaseStorage(ctx context.Context, id string) error
}

// ErrRecordsChanged: the templates' records changed since the generation
// a hold was asked at; ask again.
var ErrRecordsChanged = errs.New(errs.Unavailable, "the templates' records changed meanwhile: try again")

// Member is a node of a cluster as it last reported itself.
type Member struct {
	ID  string // the node's name
	URL string // where API replicas reach its node API
	// Drivers are the isolation drivers it offers, its default first.
	Drivers []string
	// CPUs and MemoryMB are what it may promise its sandboxes (its
	// admission's capacity); Committed* what their limits add up to.
	CPUs                                  int
	MemoryMB                              int64
	CommittedCPUMillis, CommittedMemoryMB int64
	Sandboxes                             int
	// Warm are its warm sandboxes ready, by template id; Cached the
	// templates whose newest build's layers it holds.
	Warm   map[string]int
	Cached []string
	// SandboxRange is where its sandboxes' addresses come from ("":
	// none), which no request made for a tenant may reach.
	SandboxRange string
	// Age is the time since its last heartbeat, by the database's clock.
	Age time.Duration
}

// Members is the cluster's membership, kept by the database (PostgreSQL)
// that the API replicas and the nodes share.
type Members interface {
	// Heartbeat records a node's report and the time (the database's).
	Heartbeat(ctx context.Context, m Member) error
	// Leave removes a node that stops on purpose.
	Leave(ctx context.Context, id string) error
	Members(ctx context.Context) ([]Member, error)
	// ForgetSandboxesOn removes the records of a lost node's sandboxes and
	// returns their ids, and logs LostMessage for each (reason
	// ReasonNodeLost, the node); those with a paused state stay, their
	// node "" (another node may take them over).
	ForgetSandboxesOn(ctx context.Context, node string) ([]string, error)
	// SetPausedState records what another node would take a paused
	// sandbox over from (nil: nothing; it runs, or stays on its node).
	SetPausedState(ctx context.Context, id string, state []byte) error
	PausedState(ctx context.Context, id string) ([]byte, error)
	// PausedStates are every recorded paused state (what the object store
	// keeps for them).
	PausedStates(ctx context.Context) ([][]byte, error)
	// MoveSandbox records sandbox id on node to if it is recorded on from,
	// and reports whether it was.
	MoveSandbox(ctx context.Context, id, from, to string) (bool, error)
	// SandboxesOn returns the ids of the sandboxes recorded on a node.
	SandboxesOn(ctx context.Context, node string) ([]string, error)
}

// Volumes are a cluster's volume records (PostgreSQL), each naming the
// node that holds its files; on one host the volume store keeps its own.
type Volumes interface {
	// AddVolume records v; AlreadyExists when its team has one so named.
	AddVolume(ctx context.Context, v volume.Volume) error
	// Volume finds a team's volume by id or name.
	Volume(ctx context.Context, team, ref string) (volume.Volume, error)
	// VolumeByID finds any team's volume by id.
	VolumeByID(ctx context.Context, id string) (volume.Volume, error)
	// TeamVolumes are a team's volumes, oldest first.
	TeamVolumes(ctx context.Context, team string) ([]volume.Volume, error)
	// NodeVolumes are the volumes a node holds.
	NodeVolumes(ctx context.Context, node string) ([]volume.Volume, error)
	// RemoveVolume deletes a team's volume record (by id or name) and
	// returns it.
	RemoveVolume(ctx context.Context, team, ref string) (volume.Volume, error)
}
