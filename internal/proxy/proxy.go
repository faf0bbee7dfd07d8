// Package proxy routes sandbox traffic: a request carrying E2b-Sandbox-Id
// and E2b-Sandbox-Port, or sent to a host named {port}-{id}.{domain}, goes
// to that port inside that sandbox, as the SDKs address it. Responses stream
// (no buffering) and upgrades (WebSockets) pass through.
package proxy

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/connguard"

	"github.com/covesandbox/cove/internal/envd/envdwire"
)

// Sandboxes is what the proxy needs of the node.
type Sandboxes interface {
	// Wake reports whether a sandbox runs, resuming it first when it is
	// paused with auto-resume (the request waits for it). The proxy asks
	// only for requests that carry the sandbox's credential.
	Wake(ctx context.Context, id string) bool
	// Running reports whether a sandbox runs, waking nothing.
	Running(id string) bool
	// AccessToken is the token its agent requires ("" when it is not
	// secure).
	AccessToken(id string) string
	// Dial connects to port inside the sandbox.
	Dial(ctx context.Context, id string, port int) (net.Conn, error)
	// TrafficToken is the token the sandbox's ports (all but the agent's)
	// require; "" when its traffic is public.
	TrafficToken(id string) string
	// PortRoute is how traffic to a port of the sandbox goes: the Host
	// header it gets (its maskRequestHost), "" to keep the client's; and
	// whether the port serves HTTPS (its network.httpsPorts).
	PortRoute(id string, port int) (host string, https bool)
	// AgentTransport is the node's own connection pool to a sandbox's
	// agent, which adds nothing to requests: the proxy sends agent traffic
	// over it, so a sandbox's first command finds a connection the node
	// opened while it was warm.
	AgentTransport(id string) (http.RoundTripper, bool)
}

// trafficTokenHeader carries the traffic token of a sandbox whose ports
// are not public.
const trafficTokenHeader = "E2b-Traffic-Access-Token"

// SignedFiles finds the sandbox a signed file URL was made for. With
// E2B_SANDBOX_URL set, the SDK's uploadUrl/downloadUrl carry no sandbox id:
// the signature, keyed by one sandbox's token, is what names it.
type SignedFiles interface {
	SandboxForSignature(ctx context.Context, path, operation, user, signature, expiration string) (id string, ok bool)
}

// Proxy is the sandbox traffic handler.
type Proxy struct {
	sandboxes Sandboxes
	signed    SignedFiles
	domain    string
	log       *slog.Logger
	rp        *httputil.ReverseProxy
}

type target struct {
	id     string
	port   int
	denied string // set when the request is sandbox traffic that must be refused
	host   string // the Host header to send upstream ("" = the client's)
	https  bool   // the port serves HTTPS: the hop into the sandbox is TLS
	// apiOrigin: the request came to the API's own host (by header or a
	// signed URL), whose origin the dashboard's page shares.
	apiOrigin bool
	// signed: routed by a file URL's signature, which the service checked
	// against the sandbox's token.
	signed bool
}

type targetKey struct{}

// New returns a proxy for host names under domain; signed (may be nil)
// routes signed file URLs that name no sandbox.
func New(sb Sandboxes, signed SignedFiles, domain string, log *slog.Logger) *Proxy {
	// The reported domain may carry the server's port ("localhost:3000") so
	// that the SDK's getHost(port) names a reachable address; routing
	// compares host names only.
	if h, _, err := net.SplitHostPort(domain); err == nil {
		domain = h
	}
	p := &Proxy{sandboxes: sb, signed: signed, domain: strings.ToLower(domain), log: log}
	tr := &http.Transport{
		DialContext:         p.dial,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = t.id + "." + strconv.Itoa(t.port) + ".sandbox"
			pr.Out.Host = pr.In.Host
			if t.host != "" {
				pr.Out.Host = t.host
			}
			pr.Out.Header.Del("E2b-Sandbox-Id")
			pr.Out.Header.Del("E2b-Sandbox-Port")
			pr.SetXForwarded()
		},
		// What a sandbox answers on the API's own host is the sandbox's,
		// not the API's: a browser that opens it (a signed file's HTML,
		// say) runs it in an origin of its own, never the dashboard's.
		ModifyResponse: func(resp *http.Response) error {
			if t, _ := resp.Request.Context().Value(targetKey{}).(target); t.apiOrigin {
				resp.Header.Set("Content-Security-Policy", "sandbox")
				resp.Header.Set("X-Content-Type-Options", "nosniff")
			}
			return nil
		},
		Transport:     agentFirst{p: p, next: tr},
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if b, ok := r.Body.(*guardedBody); ok {
				_ = b.Close()
			}
			t := r.Context().Value(targetKey{}).(target)
			writeJSON(w, http.StatusBadGateway, map[string]any{
				"sandboxId": t.id, "port": t.port, "code": http.StatusBadGateway,
				"message": fmt.Sprintf("The sandbox is running but port %d is not open", t.port),
			})
		},
	}
	return p
}

// agentFirst sends requests for a sandbox's agent over the node's
// connections to it, others over the proxy's own transport.
type agentFirst struct {
	p    *Proxy
	next http.RoundTripper
}

func (a agentFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	t, _ := r.Context().Value(targetKey{}).(target)
	if t.port == envdwire.Port {
		if rt, ok := a.p.sandboxes.AgentTransport(t.id); ok {
			r = r.Clone(r.Context())
			r.URL.Host = envdwire.Host // the pool's key for those connections
			return rt.RoundTrip(r)
		}
	}
	return a.next.RoundTrip(r)
}

// dial reads the target back from the outgoing URL's host.
func (p *Proxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	parts := strings.Split(host, ".")
	if len(parts) != 3 || parts[2] != "sandbox" {
		return nil, fmt.Errorf("proxy: unexpected upstream %q", addr)
	}
	port, err := strconv.Atoi(parts[1])
	if err != nil {
		return nil, fmt.Errorf("proxy: unexpected upstream %q", addr)
	}
	c, err := p.sandboxes.Dial(ctx, parts[0], port)
	if t, _ := ctx.Value(targetKey{}).(target); err == nil && t.https && t.id == parts[0] && t.port == port {
		// A port that serves HTTPS: the hop into the sandbox is TLS, its
		// certificate the sandbox's own (most often self-signed), taken
		// as it is: the hop stays on this host.
		return tls.Client(c, &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}), nil //nolint:gosec // see above
	}
	return c, err
}

// Match reports whether r is sandbox traffic.
func (p *Proxy) Match(r *http.Request) bool {
	_, ok := p.route(r)
	return ok
}

// route finds the sandbox and port a request is for.
func (p *Proxy) route(r *http.Request) (target, bool) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		port := envdwire.Port
		if v := r.Header.Get("E2b-Sandbox-Port"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				port = -1
			} else {
				port = n
			}
		}
		return target{id: stripClientID(id), port: port, apiOrigin: true}, true
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(host, "."+p.domain)
	if !ok || strings.Contains(label, ".") {
		return p.routeSigned(r)
	}
	portStr, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || id == "" {
		return target{}, false
	}
	if port < 1 || port > 65535 {
		port = -1
	}
	return target{id: stripClientID(id), port: port}, true
}

// routeSigned routes GET and POST /files?…&signature=… to the sandbox
// whose token made the signature.
func (p *Proxy) routeSigned(r *http.Request) (target, bool) {
	if p.signed == nil || r.URL.Path != "/files" {
		return target{}, false
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return target{}, false
	}
	op := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if op == "" {
		return target{}, false
	}
	id, ok := p.signed.SandboxForSignature(r.Context(), q.Get("path"), op, q.Get("username"), sig, q.Get("signature_expiration"))
	if !ok {
		return target{denied: "invalid signature: no sandbox signed this URL"}, true
	}
	return target{id: id, port: envdwire.Port, apiOrigin: true, signed: true}, true
}

// stripClientID accepts E2B's "<id>-<clientID>" form.
func stripClientID(id string) string {
	if i := strings.IndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// ServeHTTP forwards r to its sandbox. Unknown sandboxes and the agent's
// internal paths are refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t, ok := p.route(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if t.denied != "" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": http.StatusUnauthorized, "message": t.denied})
		return
	}
	if t.port < 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"sandboxId": t.id, "code": http.StatusBadRequest, "message": "invalid sandbox port"})
		return
	}
	if !validID(t.id) {
		writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": t.id, "code": http.StatusBadGateway, "message": "The sandbox was not found"})
		return
	}
	if t.port == envdwire.Port && envdwire.IsInternalPath(r.URL.Path) {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": http.StatusNotFound, "message": "not found"})
		return
	}
	// The credential first: a request without it wakes no paused sandbox.
	// The agent's health, which it answers anyone, reaches a running one.
	switch status, msg := p.credential(r, t); {
	case status == 0:
		if !p.sandboxes.Wake(r.Context(), t.id) {
			writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": t.id, "code": http.StatusBadGateway, "message": "The sandbox was not found"})
			return
		}
		// Its credential, or a public port of a sandbox that exists: the
		// connection is the sandbox's traffic now, bounded as such.
		connguard.Authenticated(r.Context())
	case t.port == envdwire.Port && r.URL.Path == "/health" && p.sandboxes.Running(t.id):
	default:
		writeJSON(w, status, map[string]any{"sandboxId": t.id, "code": status, "message": msg})
		return
	}
	if t.port != envdwire.Port {
		r.Header.Del(trafficTokenHeader)
		t.host, t.https = p.sandboxes.PortRoute(t.id, t.port)
	}
	// The upstream may answer (and the answer be flushed) before the
	// request body is fully forwarded, as the agent's streaming RPCs do. An
	// HTTP/1 server drops the request body at the first flush unless told
	// the handler is full duplex; the transport then fails writing the body
	// and closes the upstream connection mid-stream.
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	// When the upstream fails mid-request (its sandbox died), the reverse
	// proxy answers and returns while its transport may still be reading
	// the request body, or having read it only to its length: the
	// server's own end-of-body read would then start after the handler
	// returned, beside its read of the next request, which net/http
	// refuses with a panic (golang/go#68560). The body is ended before
	// this handler returns (finish).
	body := &guardedBody{rc: r.Body, ctl: rc, want: r.ContentLength}
	r.Body = body
	defer body.finish()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// credential checks that r carries what its sandbox requires: on the
// agent's port, the access token (or a file URL's signature) of a secure
// sandbox, which the agent checks again; on the others, the traffic token
// of a private one. It answers 0, or the refusal's status and message.
func (p *Proxy) credential(r *http.Request, t target) (int, string) {
	if t.port != envdwire.Port {
		if tok := p.sandboxes.TrafficToken(t.id); tok != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(trafficTokenHeader)), []byte(tok)) != 1 {
			return http.StatusForbidden, "this sandbox's traffic is private: send its traffic access token in the " + trafficTokenHeader + " header"
		}
		return 0, ""
	}
	if tok := p.sandboxes.AccessToken(t.id); tok != "" && !t.signed && !envdwire.Authorized(r, tok) {
		return http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported"
	}
	return 0, ""
}

// guardedBody is a request body that stops reading once it is closed or
// its handler ends, whichever comes first.
type guardedBody struct {
	mu   sync.Mutex // held while a Read runs
	done bool
	rc   io.ReadCloser
	ctl  *http.ResponseController
	want int64 // the request's Content-Length (-1: unknown)
	got  int64 // read so far
	eof  bool
}

var errHandlerDone = errors.New("proxy: the request was answered")

func (b *guardedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return 0, errHandlerDone
	}
	n, err := b.rc.Read(p)
	b.got += int64(n)
	b.eof = b.eof || err == io.EOF
	return n, err
}

// finish ends the body as its handler returns. A body read to its length
// but not to its end is read once more, here, so that the server's own
// end-of-body read starts while the handler still runs; a body not read
// whole is closed (closing one read whole would cost the client its
// keep-alive connection: +4 ms a command). Then no more reads.
func (b *guardedBody) finish() {
	b.lock()
	defer b.mu.Unlock()
	if !b.eof && b.want >= 0 && b.got == b.want {
		var one [1]byte
		_, err := b.rc.Read(one[:])
		b.eof = err == io.EOF
	}
	if !b.eof {
		_ = b.rc.Close()
	}
	b.done = true
}

func (b *guardedBody) Close() error {
	b.stop()
	return b.rc.Close()
}

// stop waits for a Read in flight and refuses every later one.
func (b *guardedBody) stop() {
	b.lock()
	b.done = true
	b.mu.Unlock()
}

// lock takes mu, unblocking a Read in flight through the connection's read
// deadline (the connection is not reused then).
func (b *guardedBody) lock() {
	if !b.mu.TryLock() {
		_ = b.ctl.SetReadDeadline(time.Now())
		b.mu.Lock()
	}
}

func validID(id string) bool {
	if id == "" || len(id) > 63 {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
