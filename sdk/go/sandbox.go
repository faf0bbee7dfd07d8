package cove

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// CreateOptions describe a new sandbox; zero values take the server's
// defaults (template "base", 5 minutes).
type CreateOptions struct {
	Template string
	Timeout  time.Duration
	Metadata map[string]string
	Envs     map[string]string
	// Volumes mounts volumes (by name) read-write: path → volume.
	Volumes map[string]string
	// OnTimeout is what the sandbox's timeout does to it: OnTimeoutKill
	// (the default), OnTimeoutPause or OnTimeoutPauseFiles.
	OnTimeout OnTimeout
	// AutoResume resumes a sandbox its timeout paused with its memory on
	// the first traffic to one of its ports.
	AutoResume bool
	// CPUCount and MemoryMB size the sandbox, up to its template's
	// MaxCPUCount and MaxMemoryMB (0: the template's size).
	CPUCount int
	MemoryMB int
	// IdempotencyKey, when set (1 to 255 of a-z, 0-9 and -), makes the
	// create safe to send again: a repeat within a day gets the first
	// one's answer and makes no second sandbox (ErrConflict while the
	// first runs, or when the key was used for another request).
	IdempotencyKey string
}

// OnTimeout is what a sandbox's timeout does to it.
type OnTimeout int

const (
	// OnTimeoutKill kills the sandbox.
	OnTimeoutKill OnTimeout = iota
	// OnTimeoutPause pauses it with its memory, as Pause.
	OnTimeoutPause
	// OnTimeoutPauseFiles pauses it keeping its files only, as
	// PauseWithoutMemory.
	OnTimeoutPauseFiles
)

// SandboxInfo is what the server reports of a sandbox.
type SandboxInfo struct {
	ID         string `json:"sandboxID"`
	TemplateID string `json:"templateID"`
	// Name is the template's name the sandbox was made from, when it was
	// asked for by name.
	Name       string            `json:"alias,omitempty"`
	State      string            `json:"state"`
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      time.Time         `json:"endAt"`
	CPUCount   int               `json:"cpuCount"`
	MemoryMB   int               `json:"memoryMB"`
	DiskSizeMB int               `json:"diskSizeMB"`
	Metadata   map[string]string `json:"metadata"`
	// Isolation is the driver the sandbox runs on ("namespaces",
	// "gvisor", "microvm"): Cove's own field.
	Isolation string `json:"isolation,omitempty"`
	// Node, in a cluster, is the node the sandbox runs on ("" on a
	// server that is its own node): Cove's own field.
	Node string `json:"node,omitempty"`
}

// Sandbox is a running sandbox: its commands, files and terminals.
type Sandbox struct {
	ID         string
	TemplateID string
	Commands   *Commands
	Files      *Files
	PTY        *PTY
	// Code runs code in the code interpreter of a code-interpreter-v1
	// sandbox (or one from a template over it).
	Code *CodeInterpreter

	client *Client
	token  string
	envd   *http.Client
}

type sandboxJSON struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

// Create starts a sandbox and returns once it is ready.
func (c *Client) Create(ctx context.Context, opts CreateOptions) (*Sandbox, error) {
	body := map[string]any{"templateID": opts.Template}
	if opts.Template == "" {
		body["templateID"] = "base"
	}
	if opts.Timeout > 0 {
		body["timeout"] = int64((opts.Timeout + time.Second - 1) / time.Second)
	}
	if opts.Metadata != nil {
		body["metadata"] = opts.Metadata
	}
	if opts.Envs != nil {
		body["envVars"] = opts.Envs
	}
	if len(opts.Volumes) > 0 {
		var mounts []map[string]string
		for path, name := range opts.Volumes {
			mounts = append(mounts, map[string]string{"name": name, "path": path})
		}
		body["volumeMounts"] = mounts
	}
	if opts.OnTimeout != OnTimeoutKill {
		body["autoPause"] = true
		body["autoPauseMemory"] = opts.OnTimeout == OnTimeoutPause
	}
	if opts.AutoResume {
		body["autoResume"] = map[string]bool{"enabled": true}
	}
	if opts.CPUCount > 0 {
		body["cpuCount"] = opts.CPUCount
	}
	if opts.MemoryMB > 0 {
		body["memoryMB"] = opts.MemoryMB
	}
	var header http.Header
	if opts.IdempotencyKey != "" {
		header = http.Header{"Idempotency-Key": {opts.IdempotencyKey}}
	}
	var out sandboxJSON
	if _, err := c.doWith(ctx, http.MethodPost, "/v2/sandboxes", header, body, &out); err != nil {
		return nil, err
	}
	return c.attach(out), nil
}

// Connect attaches to a running sandbox (and makes it live at least timeout
// more; zero keeps the server's default).
func (c *Client) Connect(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	body := map[string]any{}
	if timeout > 0 {
		body["timeout"] = int64((timeout + time.Second - 1) / time.Second)
	}
	var out sandboxJSON
	if _, err := c.do(ctx, http.MethodPost, "/v2/sandboxes/"+url.PathEscape(id)+"/connect", body, &out); err != nil {
		return nil, err
	}
	return c.attach(out), nil
}

func (c *Client) attach(j sandboxJSON) *Sandbox {
	s := &Sandbox{ID: j.SandboxID, TemplateID: j.TemplateID, client: c, token: j.EnvdAccessToken}
	s.envd = &http.Client{Transport: sandboxTransport{s: s, port: "49983", next: c.http.Transport}}
	proc := processconnect.NewProcessClient(s.envd, c.sandboxURL)
	fs := filesystemconnect.NewFilesystemClient(s.envd, c.sandboxURL)
	s.Commands = &Commands{s: s, rpc: proc}
	s.PTY = &PTY{s: s, rpc: proc}
	s.Files = &Files{s: s, rpc: fs}
	s.Code = &CodeInterpreter{s: s, http: &http.Client{Transport: sandboxTransport{s: s, port: codeInterpreterPort, next: c.http.Transport}}}
	return s
}

// sandboxTransport addresses every request to a port of the sandbox (its
// agent's, or the code interpreter's), with the sandbox's access token.
type sandboxTransport struct {
	s    *Sandbox
	port string
	next http.RoundTripper
}

func (t sandboxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("E2b-Sandbox-Id", t.s.ID)
	r.Header.Set("E2b-Sandbox-Port", t.port)
	if t.s.token != "" {
		r.Header.Set("X-Access-Token", t.s.token)
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// Info returns the sandbox's current state.
func (s *Sandbox) Info(ctx context.Context) (SandboxInfo, error) { return s.client.Info(ctx, s.ID) }

// Info returns a sandbox's current state.
func (c *Client) Info(ctx context.Context, id string) (SandboxInfo, error) {
	var out SandboxInfo
	_, err := c.do(ctx, http.MethodGet, "/sandboxes/"+url.PathEscape(id), nil, &out)
	return out, err
}

// SetTimeout makes the sandbox end timeout from now; 0 or less ends it
// now, paused or killed as its OnTimeout says, before SetTimeout returns.
func (s *Sandbox) SetTimeout(ctx context.Context, timeout time.Duration) error {
	_, err := s.client.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(s.ID)+"/timeout",
		map[string]int64{"timeout": int64((timeout + time.Second - 1) / time.Second)}, nil)
	return err
}

// Kill ends the sandbox.
func (s *Sandbox) Kill(ctx context.Context) error { return s.client.Kill(ctx, s.ID) }

// Pause freezes the sandbox with its memory: its processes stop where they
// are and go on at Connect (or Client.Resume); its timeout stops meanwhile.
func (s *Sandbox) Pause(ctx context.Context) error { return s.client.Pause(ctx, s.ID) }

// Pause freezes a sandbox with its memory; one paused already is
// ErrConflict.
func (c *Client) Pause(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", map[string]any{"memory": true}, nil)
	return err
}

// PauseWithoutMemory pauses the sandbox keeping its files only (see
// Client.PauseWithoutMemory).
func (s *Sandbox) PauseWithoutMemory(ctx context.Context) error {
	return s.client.PauseWithoutMemory(ctx, s.ID)
}

// PauseWithoutMemory pauses a sandbox keeping its files only: its
// processes end and it holds no memory; Resume or Connect boots it again
// over its files, with the same id and token. One paused already is
// ErrConflict.
func (c *Client) PauseWithoutMemory(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/pause", map[string]any{"memory": false}, nil)
	return err
}

// Resume lets a paused sandbox run again, ending timeout from now (0: the
// server's default); a running one is ErrConflict.
// Connect resumes a paused sandbox too.
func (c *Client) Resume(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	body := map[string]any{}
	if timeout > 0 {
		body["timeout"] = int64((timeout + time.Second - 1) / time.Second)
	}
	var out sandboxJSON
	if _, err := c.do(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(id)+"/resume", body, &out); err != nil {
		return nil, err
	}
	return c.attach(out), nil
}

// Reboot resumes a paused sandbox over its files alone: its processes
// start afresh, whether it was paused with its memory or not (E2B's
// connect with onResume "reboot"); it ends timeout from now (0: the
// server's default). A running one is returned as it is.
func (c *Client) Reboot(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	body := map[string]any{"memory": false}
	if timeout > 0 {
		body["timeout"] = int64((timeout + time.Second - 1) / time.Second)
	}
	var out sandboxJSON
	if _, err := c.do(ctx, http.MethodPost, "/v2/sandboxes/"+url.PathEscape(id)+"/connect", body, &out); err != nil {
		return nil, err
	}
	return c.attach(out), nil
}

// Kill ends a sandbox; an unknown one is ErrNotFound.
func (c *Client) Kill(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, nil)
	return err
}

// Metric is a sample of a sandbox's resource use.
type Metric struct {
	Timestamp  time.Time `json:"timestamp"`
	CPUCount   int       `json:"cpuCount"`
	CPUUsedPct float64   `json:"cpuUsedPct"`
	MemUsed    uint64    `json:"memUsed"`
	MemTotal   uint64    `json:"memTotal"`
	DiskUsed   uint64    `json:"diskUsed"`
	DiskTotal  uint64    `json:"diskTotal"`
	// EgressConnections are those the sandbox holds open through its
	// node's egress proxy (Cove's).
	EgressConnections uint64 `json:"egressConnections"`
}

// Metrics returns the sandbox's resource use: the samples kept so far
// (every few seconds since it started), oldest first.
func (s *Sandbox) Metrics(ctx context.Context) ([]Metric, error) {
	return s.MetricsBetween(ctx, time.Time{}, time.Time{})
}

// MetricsBetween returns the samples taken from start to end (whole
// seconds, inclusive; a zero time leaves that side open).
func (s *Sandbox) MetricsBetween(ctx context.Context, start, end time.Time) ([]Metric, error) {
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", strconv.FormatInt(start.Unix(), 10))
	}
	if !end.IsZero() {
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
	}
	path := "/sandboxes/" + url.PathEscape(s.ID) + "/metrics"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Metric
	_, err := s.client.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// ListOptions filter List.
type ListOptions struct {
	Metadata map[string]string
	States   []string // "running", "paused"; empty = both
	// Template keeps the sandboxes of one template (id or name).
	Template string
	// StartedAfter keeps sandboxes started at or after it (zero = any).
	StartedAfter time.Time
}

// List returns every sandbox of the key's team that matches, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) ([]SandboxInfo, error) {
	q := url.Values{}
	if len(opts.Metadata) > 0 {
		m := url.Values{}
		for k, v := range opts.Metadata {
			m.Set(k, v)
		}
		q.Set("metadata", m.Encode())
	}
	if len(opts.States) > 0 {
		q.Set("state", strings.Join(opts.States, ","))
	}
	if opts.Template != "" {
		q.Set("template", opts.Template)
	}
	if !opts.StartedAfter.IsZero() {
		q.Set("startedAfter", opts.StartedAfter.UTC().Format(time.RFC3339Nano))
	}
	return listAll[SandboxInfo](ctx, c, "/v2/sandboxes", q)
}

// listAll gets every page of a list (continued by the X-Next-Token
// header's value).
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	var all []T
	for {
		var page []T
		resp, err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, &page)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		next := resp.Header.Get("X-Next-Token")
		if next == "" {
			return all, nil
		}
		q.Set("nextToken", next)
	}
}
