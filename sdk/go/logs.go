package cove

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEntry is a line of a sandbox's log: what Cove recorded of its life
// (created, paused, killed …; kept after it ends) and what its agent
// logged while it ran (processes started and ended).
type LogEntry struct {
	Time    time.Time         `json:"timestamp"`
	Level   string            `json:"level"` // debug, info, warn or error
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

// LogOptions select lines of a sandbox's log.
type LogOptions struct {
	// Since is where the lines start (to the millisecond, inclusive); zero
	// is the first line, or with Backward the last.
	Since time.Time
	// Backward returns the lines before Since, newest first.
	Backward bool
	// Level is the lowest level returned ("" = all).
	Level string
	// Search keeps the lines whose message holds it (case-sensitive).
	Search string
	// Limit caps the lines returned (0 = the server's default, 1000).
	Limit int
}

// Logs returns lines of a sandbox's log.
func (c *Client) Logs(ctx context.Context, id string, opts LogOptions) ([]LogEntry, error) {
	q := url.Values{}
	if !opts.Since.IsZero() {
		q.Set("cursor", strconv.FormatInt(opts.Since.UnixMilli(), 10))
	}
	if opts.Backward {
		q.Set("direction", "backward")
	}
	if opts.Level != "" {
		q.Set("level", opts.Level)
	}
	if opts.Search != "" {
		q.Set("search", opts.Search)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	var out struct {
		Logs []LogEntry `json:"logs"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v2/sandboxes/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, &out)
	return out.Logs, err
}

// Logs returns lines of the sandbox's log.
func (s *Sandbox) Logs(ctx context.Context, opts LogOptions) ([]LogEntry, error) {
	return s.client.Logs(ctx, s.ID, opts)
}
