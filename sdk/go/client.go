package cove

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Client talks to a Cove (or E2B-compatible) server.
type Client struct {
	apiURL     string
	sandboxURL string
	apiKey     string
	http       *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithAPIURL sets the REST API's base URL.
func WithAPIURL(u string) Option { return func(c *Client) { c.apiURL = strings.TrimRight(u, "/") } }

// WithSandboxURL sets the base URL of sandbox traffic (default: the API URL).
func WithSandboxURL(u string) Option {
	return func(c *Client) { c.sandboxURL = strings.TrimRight(u, "/") }
}

// WithAPIKey sets the API key.
func WithAPIKey(k string) Option { return func(c *Client) { c.apiKey = k } }

// WithHTTPClient sets the HTTP client for every call.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// NewClient returns a client configured from the environment (COVE_API_URL,
// COVE_SANDBOX_URL, COVE_API_KEY, else their E2B_ names; the API URL
// defaults to http://127.0.0.1:3000), then from opts.
func NewClient(opts ...Option) (*Client, error) {
	c := &Client{
		apiURL:     strings.TrimRight(env("COVE_API_URL", "E2B_API_URL", "http://127.0.0.1:3000"), "/"),
		sandboxURL: strings.TrimRight(env("COVE_SANDBOX_URL", "E2B_SANDBOX_URL", ""), "/"),
		apiKey:     env("COVE_API_KEY", "E2B_API_KEY", ""),
		http:       &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}},
	}
	for _, o := range opts {
		o(c)
	}
	if c.sandboxURL == "" {
		c.sandboxURL = c.apiURL
	}
	if c.apiKey == "" {
		return nil, fmt.Errorf("%w: no API key: set COVE_API_KEY (or E2B_API_KEY) or use WithAPIKey", ErrUnauthorized)
	}
	return c, nil
}

func env(name, fallback, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	if v := os.Getenv(fallback); v != "" {
		return v
	}
	return def
}

// APIURL is the REST API's base URL.
func (c *Client) APIURL() string { return c.apiURL }

// do sends a REST call; out (if not nil) receives the JSON answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (*http.Response, error) {
	return c.doWith(ctx, method, path, nil, in, out)
}

// doWith is do with header's fields added to the request.
func (c *Client) doWith(ctx context.Context, method, path string, header http.Header, in, out any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.apiURL+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("X-API-Key", c.apiKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, transportErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return resp, apiError(resp)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp, nil
}
