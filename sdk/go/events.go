package cove

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Event is a sandbox's lifecycle event (created, updated, paused, resumed,
// checkpointed, killed), as the team's webhooks receive it.
type Event struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"` // sandbox.lifecycle.created, …
	SandboxID  string    `json:"sandboxId"`
	TemplateID string    `json:"sandboxTemplateId"`
	BuildID    string    `json:"sandboxBuildId"`
	Timestamp  time.Time `json:"timestamp"`
	Data       EventData `json:"eventData"`
}

// EventData is what an event carries beside its sandbox.
type EventData struct {
	Metadata map[string]string `json:"sandbox_metadata"`
	// Reason is why it happened (Cove's): api, timeout, exited, …
	Reason string `json:"reason,omitempty"`
}

// EventOptions selects events: one sandbox's (SandboxID) or the team's,
// of Types (none: all), a page of Limit (0: the server's 100) from Offset,
// newest first unless Ascending.
type EventOptions struct {
	SandboxID     string
	Types         []string
	Limit, Offset int
	Ascending     bool
}

// Events lists the team's lifecycle events (kept 7 days by default).
func (c *Client) Events(ctx context.Context, opts EventOptions) ([]Event, error) {
	path := "/events/sandboxes"
	if opts.SandboxID != "" {
		path += "/" + url.PathEscape(opts.SandboxID)
	}
	q := url.Values{}
	if len(opts.Types) > 0 {
		q.Set("types", strings.Join(opts.Types, ","))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Offset > 0 {
		q.Set("offset", strconv.Itoa(opts.Offset))
	}
	if opts.Ascending {
		q.Set("orderAsc", "true")
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Event
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// Webhook sends the team's lifecycle events to URL, each signed with its
// secret (the e2b-signature header).
type Webhook struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"` // the types it receives
	CreatedAt time.Time `json:"createdAt"`
}

// WebhookChange is what CreateWebhook sets (URL is required there; no
// Events means every type, no Secret unsigned deliveries) and what
// UpdateWebhook changes (the fields given).
type WebhookChange struct {
	Name    *string   `json:"name,omitempty"`
	URL     *string   `json:"url,omitempty"`
	Enabled *bool     `json:"enabled,omitempty"`
	Events  *[]string `json:"events,omitempty"`
	Secret  *string   `json:"signatureSecret,omitempty"`
}

// CreateWebhook registers a webhook; it is enabled unless Enabled says not.
func (c *Client) CreateWebhook(ctx context.Context, w WebhookChange) (Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, http.MethodPost, "/events/webhooks", w, &out)
	return out, err
}

// ListWebhooks returns the team's webhooks.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var out []Webhook
	_, err := c.do(ctx, http.MethodGet, "/events/webhooks", nil, &out)
	return out, err
}

// GetWebhook returns one webhook; an unknown one is ErrNotFound.
func (c *Client) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, http.MethodGet, "/events/webhooks/"+url.PathEscape(id), nil, &out)
	return out, err
}

// UpdateWebhook changes the fields w gives.
func (c *Client) UpdateWebhook(ctx context.Context, id string, w WebhookChange) (Webhook, error) {
	var out Webhook
	_, err := c.do(ctx, http.MethodPatch, "/events/webhooks/"+url.PathEscape(id), w, &out)
	return out, err
}

// DeleteWebhook removes a webhook and what it had still to deliver.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/events/webhooks/"+url.PathEscape(id), nil, nil)
	return err
}

// Delivery is an event a webhook has still to take: not tried yet, or
// tried Attempts times in vain (LastError says why the last failed), due
// again at NextAttemptAt.
type Delivery struct {
	ID            string    `json:"id"`
	EventID       string    `json:"eventID"`
	EventType     string    `json:"eventType"`
	SandboxID     string    `json:"sandboxID"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"nextAttemptAt"`
	LastError     string    `json:"lastError,omitempty"`
}

// WebhookDeliveries lists what a webhook has still to take (Cove's own
// endpoint); a delivery taken or given up is gone from it.
func (c *Client) WebhookDeliveries(ctx context.Context, id string) ([]Delivery, error) {
	var out []Delivery
	_, err := c.do(ctx, http.MethodGet, "/events/webhooks/"+url.PathEscape(id)+"/deliveries", nil, &out)
	return out, err
}
