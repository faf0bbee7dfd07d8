// Package dashboard is Cove's web dashboard at /dashboard, served by `cove
// server` and `cove api`: a page (web/, embedded) that logs in with an API
// key into a signed cookie session and then calls E2B's REST API as the
// session's team (under /dashboard/api/e2b/), plus what only the
// dashboard needs: the team's API keys and the nodes' status.
package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/connguard"

	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
)

//go:embed web/index.html web/app.js web/app.css web/vendor/xterm.mjs web/vendor/xterm.css web/vendor/xterm.LICENSE
var webFS embed.FS

// Prefix is where the dashboard is served.
const Prefix = "/dashboard"

const (
	cookieName = "cove_session"
	// secureCookieName is the session's cookie over HTTPS: a __Host-
	// cookie, which browsers take only from this very host, Secure, for
	// path / and with no Domain, so a sandbox's page on a sibling host
	// ({port}-{id}.<domain>) cannot plant one that the dashboard reads
	// (session fixation). Over plain HTTP a sibling can plant a
	// cove_session cookie (Domain=localhost): the session's token in
	// csrfHeader, which only the dashboard's own page holds, is what
	// keeps it from being read (authed).
	secureCookieName = "__Host-cove_session"
	csrfHeader       = "X-Cove-CSRF"
	// maxSessionCookies is how many cookies of the session's name a
	// request may try: the page's own and a few planted beside it.
	maxSessionCookies = 4
	// secretName is the store's secret that signs sessions (shared by a
	// cluster's replicas through its database).
	secretName = "dashboard-session"
)

// API is the REST API, served for a team the dashboard authenticated.
type API interface {
	ServeAs(team string, w http.ResponseWriter, r *http.Request)
}

// NodeStatus is a node as the dashboard shows it: to the operator with
// every team's sandboxes, to a team with its own alone.
type NodeStatus struct {
	ID string `json:"id"`
	// Node is the node's name in sandboxes' records (store.Sandbox.Node):
	// "" for the node of `cove server`.
	Node               string         `json:"-"`
	Drivers            []string       `json:"drivers"`
	CPUs               int            `json:"cpus"`
	MemoryMB           int64          `json:"memoryMB"`
	CommittedCPUMillis int64          `json:"committedCPUMillis"`
	CommittedMemoryMB  int64          `json:"committedMemoryMB"`
	Sandboxes          int            `json:"sandboxes"`
	Warm               map[string]int `json:"warm"`
	// HeartbeatAge is the time since a cluster node last reported (0 for
	// the node of `cove server`).
	HeartbeatAge float64 `json:"heartbeatAgeSeconds"`
}

// Config configures the dashboard.
type Config struct {
	Store store.Store
	API   API
	// Nodes reports the nodes sandboxes run on, with every team's
	// sandboxes (the operator's view).
	Nodes func(ctx context.Context) ([]NodeStatus, error)
	// CanSee reports whether a team may see a template (its own, or a
	// public one): a team's view of the nodes shows the warm sandboxes
	// of those alone.
	CanSee func(team, templateID string) bool
	// AdminToken, when set, is the operator's token: a login that gives
	// it too sees every team's sandboxes on the Nodes page.
	AdminToken string
	// Usage, when set, is what teams' sandboxes held on the node (cove
	// server's); a cluster's nodes meter their own (Prometheus).
	Usage func() []sandboxes.Usage
	// SessionTTL is how long a login lasts (default 12 h).
	SessionTTL time.Duration
	Log        *slog.Logger
}

// Handler serves the dashboard.
type Handler struct {
	cfg    Config
	secret []byte
	mux    *http.ServeMux
}

// New returns the dashboard's handler.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	secret, err := cfg.Store.Secret(ctx, secretName, auth.NewSecret)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, secret: secret, mux: http.NewServeMux()}
	static, err := fs.Sub(webFS, "web")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix(Prefix+"/", http.FileServerFS(static))
	h.mux.Handle("GET "+Prefix+"/{$}", files)
	if err := fs.WalkDir(static, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != "index.html" {
			h.mux.Handle("GET "+Prefix+"/"+p, files)
		}
		return err
	}); err != nil {
		return nil, err
	}
	h.mux.HandleFunc("GET "+Prefix, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"/", http.StatusFound)
	})
	h.mux.HandleFunc("POST "+Prefix+"/login", h.login)
	h.mux.HandleFunc("POST "+Prefix+"/logout", h.authed(h.logout))
	h.mux.HandleFunc("GET "+Prefix+"/api/session", h.authed(h.sessionInfo))
	h.mux.HandleFunc("GET "+Prefix+"/api/nodes", h.authed(h.nodes))
	h.mux.HandleFunc("GET "+Prefix+"/api/usage", h.authed(h.usage))
	h.mux.HandleFunc("GET "+Prefix+"/api/keys", h.authed(h.listKeys))
	h.mux.HandleFunc("POST "+Prefix+"/api/keys", h.authed(h.createKey))
	h.mux.HandleFunc("DELETE "+Prefix+"/api/keys/{hash}", h.authed(h.deleteKey))
	h.mux.HandleFunc(Prefix+"/api/e2b/", h.authed(h.e2b))
	h.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errs.New(errs.NotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return h, nil
}

// Match reports whether r is the dashboard's.
func Match(r *http.Request) bool {
	return r.URL.Path == Prefix || strings.HasPrefix(r.URL.Path, Prefix+"/")
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// The page loads only its own files, is framed by no one and sends
	// no referrer; xterm.js sets its styles inline.
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "+
		"img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

type sessionKey struct{}

func current(r *http.Request) session { s, _ := r.Context().Value(sessionKey{}).(session); return s }

// authed admits requests of a valid session whose key still exists; a
// request that changes something must also carry the session's CSRF token
// and, when the browser says where it comes from, come from this origin.
func (h *Handler) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := h.sessionOf(r)
		if err != nil {
			writeError(w, err)
			return
		}
		k, err := h.cfg.Store.APIKey(r.Context(), s.KeyHash)
		if err != nil || k.Team != s.Team {
			if err != nil && !errs.Is(err, errs.NotFound) {
				writeError(w, err)
				return
			}
			writeError(w, errs.New(errs.Unauthenticated, "the API key of this session was revoked: log in again"))
			return
		}
		connguard.Authenticated(r.Context())
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			writeError(w, errs.New(errs.PermissionDenied, "a change must come from the dashboard's own page (cross-site request?)"))
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	}
}

// sessionOf is the request's session: of the cookies of the session's
// name it carries, the one whose token (csrf) the page sent in
// csrfHeader. Another cookie of that name — one a page on a sibling host
// planted, holding its own team's session — is never read: that page
// cannot make the dashboard's page send its token.
func (h *Handler) sessionOf(r *http.Request) (session, error) {
	cookies := r.CookiesNamed(sessionCookie(r).Name)
	if len(cookies) == 0 {
		return session{}, errs.New(errs.Unauthenticated, "not logged in")
	}
	tok := r.Header.Get(csrfHeader)
	if tok == "" {
		return session{}, errs.New(errs.Unauthenticated, "no %s header: log in from the dashboard's page", csrfHeader)
	}
	for _, c := range cookies[:min(len(cookies), maxSessionCookies)] {
		if s, err := decodeSession(h.secret, c.Value, time.Now()); err == nil && equal(tok, s.csrf(h.secret)) {
			return s, nil
		}
	}
	return session{}, errs.New(errs.Unauthenticated, "the session is not valid: log in again")
}

// sameOrigin reports whether a request the browser marked with its origin
// comes from this host.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func equal(a, b string) bool { return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// login exchanges an API key ({"apiKey"}) for a session cookie; the
// answer holds the session's CSRF token.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, errs.New(errs.PermissionDenied, "a login must come from the dashboard's own page"))
		return
	}
	var body struct {
		APIKey     string `json:"apiKey"`
		AdminToken string `json:"adminToken"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		writeError(w, errs.New(errs.InvalidArgument, "the body must be {\"apiKey\": \"e2b_…\"}, with \"adminToken\" for the operator"))
		return
	}
	if body.AdminToken != "" && !h.isAdminToken(body.AdminToken) {
		writeError(w, errs.New(errs.Unauthenticated, "invalid admin token"))
		return
	}
	hash := auth.HashAPIKey(strings.TrimSpace(body.APIKey))
	k, err := h.cfg.Store.APIKey(r.Context(), hash)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			err = errs.New(errs.Unauthenticated, "invalid API key")
		}
		writeError(w, err)
		return
	}
	connguard.Authenticated(r.Context())
	s := newSession(k.Team, hash, h.cfg.SessionTTL)
	if body.AdminToken != "" {
		s.Operator = h.operatorDigest()
	}
	c := sessionCookie(r)
	c.Value, c.Expires = s.encode(h.secret), time.Unix(s.Expires, 0)
	http.SetCookie(w, c)
	h.cfg.Log.Info("dashboard login", "team", k.Team, "key", k.Name, "operator", s.Operator != "")
	writeJSON(w, http.StatusOK, map[string]any{"team": s.Team, "csrf": s.csrf(h.secret), "operator": h.operator(s)})
}

func (h *Handler) isAdminToken(tok string) bool {
	return h.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.AdminToken)) == 1
}

// operatorDigest is what an operator's session holds of the admin token.
func (h *Handler) operatorDigest() string { return sign(h.secret, "operator", h.cfg.AdminToken) }

// operator reports whether s is the operator's: logged in with the admin
// token the server has now.
func (h *Handler) operator(s session) bool {
	return s.Operator != "" && h.cfg.AdminToken != "" && equal(s.Operator, h.operatorDigest())
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	c := sessionCookie(r)
	c.MaxAge = -1
	http.SetCookie(w, c)
	w.WriteHeader(http.StatusNoContent)
}

// sessionCookie is the session cookie's name and attributes for r: over
// HTTPS the __Host- one, over plain HTTP (loopback) the dashboard's path.
func sessionCookie(r *http.Request) *http.Cookie {
	if r.TLS != nil {
		return &http.Cookie{Name: secureCookieName, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode}
	}
	return &http.Cookie{Name: cookieName, Path: Prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

func (h *Handler) sessionInfo(w http.ResponseWriter, r *http.Request) {
	s := current(r)
	writeJSON(w, http.StatusOK, map[string]any{"team": s.Team, "csrf": s.csrf(h.secret), "expires": time.Unix(s.Expires, 0).UTC(), "operator": h.operator(s)})
}

// e2b serves E2B's REST API (the path after /dashboard/api/e2b) as the
// session's team.
func (h *Handler) e2b(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = strings.TrimPrefix(r.URL.Path, Prefix+"/api/e2b")
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("Cookie") // the API needs none of the dashboard's
	h.cfg.API.ServeAs(current(r).Team, w, r2)
}

// nodes answers the nodes: with every team's sandboxes and warm ones to
// the operator, with the session's team's alone to a team.
func (h *Handler) nodes(w http.ResponseWriter, r *http.Request) {
	list, err := h.cfg.Nodes(r.Context())
	if err == nil && !h.operator(current(r)) {
		err = h.teamView(r.Context(), current(r).Team, list)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if list == nil {
		list = []NodeStatus{}
	}
	writeJSON(w, http.StatusOK, list)
}

// teamView makes the nodes' sandboxes team's: its sandboxes' count and
// limits on each, the warm sandboxes of templates it may see.
func (h *Handler) teamView(ctx context.Context, team string, nodes []NodeStatus) error {
	sbs, err := h.cfg.Store.ListSandboxes(ctx, store.ListFilter{Team: team})
	if err != nil {
		return err
	}
	for i := range nodes {
		n := &nodes[i]
		n.Sandboxes, n.CommittedCPUMillis, n.CommittedMemoryMB = 0, 0, 0
		for _, sb := range sbs {
			if sb.Node == n.Node {
				n.Sandboxes++
				n.CommittedCPUMillis += int64(sb.CPUCount) * 1000
				n.CommittedMemoryMB += int64(sb.MemoryMB)
			}
		}
		warm := map[string]int{}
		for id, c := range n.Warm {
			if h.cfg.CanSee != nil && h.cfg.CanSee(team, id) {
				warm[id] = c
			}
		}
		n.Warm = warm
	}
	return nil
}

// usage answers the session's team's usage by template: {"metered":
// false} where the nodes meter it themselves.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Usage == nil {
		writeJSON(w, http.StatusOK, map[string]any{"metered": false})
		return
	}
	type row struct {
		Template         string  `json:"template"`
		Seconds          float64 `json:"seconds"`
		CPUSeconds       float64 `json:"cpuSeconds"`
		MemoryGiBSeconds float64 `json:"memoryGiBSeconds"`
	}
	rows := []row{}
	for _, u := range h.cfg.Usage() {
		if u.Team == current(r).Team {
			rows = append(rows, row{u.Template, u.Seconds, u.CPUSeconds, u.MemoryGiBSeconds})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"metered": true, "templates": rows})
}

type keyJSON struct {
	ID        string    `json:"id"` // the key's hash
	Name      string    `json:"name"`
	Masked    string    `json:"masked"` // e2b_ab…wxyz, as the CLI shows it
	CreatedAt time.Time `json:"createdAt"`
	LastUsed  time.Time `json:"lastUsed"` // zero: never
	Current   bool      `json:"current"`  // the key this session logged in with
	Key       string    `json:"key,omitempty"`
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) {
	s := current(r)
	keys, err := h.cfg.Store.TeamAPIKeys(r.Context(), s.Team)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = keyJSON{ID: k.Hash, Name: k.Name, Masked: k.Masked(), CreatedAt: k.CreatedAt, LastUsed: k.LastUsed, Current: k.Hash == s.KeyHash}
	}
	writeJSON(w, http.StatusOK, out)
}

// createKey makes a key for the session's team ({"name"}); the answer is
// the only time the key itself is shown.
func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
		writeError(w, errs.New(errs.InvalidArgument, "the body must be {\"name\": \"…\"}"))
		return
	}
	key, k, err := service.CreateKey(r.Context(), h.cfg.Store, current(r).Team, body.Name)
	if err != nil {
		writeError(w, err)
		return
	}
	h.cfg.Log.Info("api key created in the dashboard", "team", k.Team, "key", k.Name)
	writeJSON(w, http.StatusCreated, keyJSON{ID: k.Hash, Name: k.Name, CreatedAt: k.CreatedAt, Key: key})
}

func (h *Handler) deleteKey(w http.ResponseWriter, r *http.Request) {
	s := current(r)
	if _, err := service.RevokeKey(r.Context(), h.cfg.Store, s.Team, r.PathValue("hash")); err != nil {
		writeError(w, err)
		return
	}
	h.cfg.Log.Info("api key revoked in the dashboard", "team", s.Team)
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := errs.HTTPStatus(err)
	writeJSON(w, status, map[string]any{"code": status, "message": err.Error()})
}
