// Package httpapi is the E2B-compatible REST API (what the official SDKs
// call with E2B_API_URL and an API key): one file
// per resource and verb, errors as {"code","message"} with the HTTP status.
package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/controlplane/auth"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

// maxBody bounds a request body.
const maxBody = 1 << 20

// API serves the REST API.
type API struct {
	svc       *service.Service
	templates *service.Templates
	volumes   *service.Volumes
	files     VolumeServer // the volumes' content
	store     store.Store
	log       *slog.Logger
	mux       *http.ServeMux
	// AdminToken, when set, is the operator's token: a request with it in
	// X-Admin-Token acts as the team X-Team-ID names, and may manage its
	// keys. Set before serving.
	AdminToken string
	// Health, when set, tells GET /health how the server's listeners fare
	// (a 503 while one fails to accept). Set before serving.
	Health func() Health
	// touched throttles the record of keys' last use (hash → last write).
	touched sync.Map
}

// New returns the API handler. files finds what serves a volume's content
// (once its token is checked).
func New(svc *service.Service, templates *service.Templates, volumes *service.Volumes, files VolumeServer, st store.Store, log *slog.Logger) *API {
	a := &API{svc: svc, templates: templates, volumes: volumes, files: files, store: st, log: log, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET /health", a.health)
	a.mux.HandleFunc("GET /.well-known/openid-configuration", a.identityDiscovery)
	a.mux.HandleFunc("GET /.well-known/jwks.json", a.identityKeys)
	for _, p := range []string{"POST /sandboxes", "POST /v2/sandboxes"} {
		a.handle(p, a.createSandbox)
	}
	a.handle("GET /sandboxes", a.listSandboxesV1)
	a.handle("GET /v2/sandboxes", a.listSandboxes)
	a.handle("GET /sandboxes/metrics", a.metricsMany)
	a.handle("GET /sandboxes/{id}", a.getSandbox)
	a.handle("DELETE /sandboxes/{id}", a.killSandbox)
	a.handle("POST /sandboxes/{id}/timeout", a.setTimeout)
	a.handle("POST /sandboxes/{id}/refreshes", a.refresh)
	a.handle("POST /sandboxes/{id}/pause", a.pause)
	a.handle("POST /sandboxes/{id}/resume", a.resume)
	for _, p := range []string{"POST /sandboxes/{id}/connect", "POST /v2/sandboxes/{id}/connect"} {
		a.handle(p, a.connect)
	}
	a.handle("GET /sandboxes/{id}/metrics", a.metrics)
	a.handle("GET /sandboxes/{id}/logs", a.logsV1)
	a.handle("GET /v2/sandboxes/{id}/logs", a.logsV2)
	a.handle("PUT /sandboxes/{id}/network", a.updateNetwork)
	a.handle("POST /sandboxes/{id}/snapshots", a.createSnapshot)
	a.handle("GET /snapshots", a.listSnapshots)
	a.handle("POST /sandboxes/{id}/fork", a.fork)
	a.handle("POST /volumes", a.createVolume)
	a.handle("GET /volumes", a.listVolumes)
	a.handle("GET /volumes/{volumeID}", a.getVolume)
	a.handle("DELETE /volumes/{volumeID}", a.deleteVolume)
	a.mux.HandleFunc("/volumecontent/{volumeID}/", a.volumeContent)
	for _, p := range []string{"POST /v3/templates", "POST /v2/templates"} {
		a.handle(p, a.createTemplate)
	}
	a.handle("GET /templates", a.listTemplates)
	a.handle("GET /v2/templates", a.listTemplatesPaged)
	a.handle("GET /templates/{templateID}", a.getTemplate)
	a.handle("DELETE /templates/{templateID}", a.deleteTemplate)
	// GET /templates/aliases/{alias} and GET /templates/{templateID}/tags
	// overlap as patterns: one route serves both.
	a.handle("GET /templates/{templateID}/{sub}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("templateID") == "aliases" {
			a.templateAlias(w, r)
			return
		}
		if r.PathValue("sub") == "tags" {
			a.templateTags(w, r)
			return
		}
		writeError(w, errs.New(errs.NotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	a.handle("GET /templates/{templateID}/files/{hash}", a.templateFilesLink)
	a.mux.HandleFunc("PUT /templates/{templateID}/files/{hash}", a.uploadTemplateFiles)
	a.handle("POST /v2/templates/{templateID}/builds/{buildID}", a.startTemplateBuild)
	a.handle("GET /templates/{templateID}/builds/{buildID}/status", a.templateBuildStatus)
	a.handle("POST /templates/{templateID}/builds/{buildID}/cancel", a.cancelTemplateBuild)
	a.handle("POST /templates/{templateID}/prepare", a.prepareTemplate)
	a.handle("POST /templates/tags", a.assignTemplateTags)
	a.handle("DELETE /templates/tags", a.removeTemplateTags)
	a.handle("GET /teams", a.listTeams)
	a.handle("GET /teams/{teamID}/metrics", a.teamMetrics)
	a.handle("GET /teams/{teamID}/metrics/max", a.teamMetricsMax)
	a.handle("GET /events/sandboxes", a.listEvents)
	a.handle("GET /events/sandboxes/{sandboxID}", a.listEvents)
	a.handle("GET /events/webhooks", a.listWebhooks)
	a.handle("POST /events/webhooks", a.createWebhook)
	a.handle("GET /events/webhooks/{webhookID}", a.getWebhook)
	a.handle("PATCH /events/webhooks/{webhookID}", a.updateWebhook)
	a.handle("DELETE /events/webhooks/{webhookID}", a.deleteWebhook)
	a.handle("GET /events/webhooks/{webhookID}/deliveries", a.webhookDeliveries)
	a.handle("GET /secrets", a.listSecrets)
	a.handle("POST /secrets", a.createSecret)
	a.handle("GET /secrets/{secretID}", a.getSecret)
	for _, p := range []string{"POST /secrets/{secretID}", "PATCH /secrets/{secretID}"} {
		a.handle(p, a.updateSecret)
	}
	a.handle("DELETE /secrets/{secretID}", a.deleteSecret)
	a.handleManage("GET /api-keys", a.listAPIKeys)
	a.handleManage("POST /api-keys", a.createAPIKey)
	a.handleManage("PATCH /api-keys/{apiKeyID}", a.updateAPIKey)
	a.handleManage("DELETE /api-keys/{apiKeyID}", a.deleteAPIKey)
	a.unimplemented()
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errs.New(errs.NotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return a
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// ServeAs serves r for a team its caller authenticated (the dashboard's
// session): no API key is asked for.
func (a *API) ServeAs(team string, w http.ResponseWriter, r *http.Request) {
	a.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{team: team, kind: bySession})))
}

// caller is who a request acts for: its team, and how it proved it.
type caller struct {
	team string
	kind credential
}

type credential int

const (
	byKey     credential = iota + 1 // X-API-Key
	bySession                       // the dashboard's session (ServeAs)
	byAdmin                         // X-Admin-Token with X-Team-ID
)

type callerKey struct{}

// handle registers an authenticated route.
func (a *API) handle(pattern string, h http.HandlerFunc) {
	a.mux.Handle(pattern, a.authenticate(h))
}

// handleManage registers a route that manages a team (its keys): the
// dashboard's session or the operator's admin token may call it, a team's
// API key may not (docs/SECURITY.md says why).
func (a *API) handleManage(pattern string, h http.HandlerFunc) {
	a.mux.Handle(pattern, a.authenticate(func(w http.ResponseWriter, r *http.Request) {
		if c := callerOf(r); c.kind == byKey {
			writeError(w, errs.New(errs.PermissionDenied, "an API key cannot manage keys: use the dashboard, `cove key`, or the operator's X-Admin-Token with X-Team-ID"))
			return
		}
		h(w, r)
	}))
}

// authenticate resolves the request's credential to its team: an API key
// (X-API-Key); the operator's admin token with the team it names
// (X-Admin-Token and X-Team-ID); or either as a bearer token with the
// team it acts for (Authorization: Bearer and X-Team-ID, E2B's SDKs from
// 2.64), a key only for its own team.
func (a *API) authenticate(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if team(r) != "" { // ServeAs
			next(w, r)
			return
		}
		c, err := a.credential(r)
		if err != nil {
			writeError(w, err)
			return
		}
		connguard.Authenticated(r.Context())
		next(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// credential finds who r acts for from its headers.
func (a *API) credential(r *http.Request) (caller, error) {
	ctx := r.Context()
	if tok := r.Header.Get("X-Admin-Token"); tok != "" {
		return a.admin(ctx, tok, r.Header.Get("X-Team-ID"))
	}
	if key := r.Header.Get("X-API-Key"); key != "" {
		return a.apiKey(ctx, key)
	}
	if tok, ok := bearerToken(r); ok {
		teamID := r.Header.Get("X-Team-ID")
		if teamID == "" {
			return caller{}, errs.New(errs.Unauthenticated, "a bearer token acts for the team X-Team-ID names: send it")
		}
		if a.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.AdminToken)) == 1 {
			return a.admin(ctx, tok, teamID)
		}
		c, err := a.apiKey(ctx, tok)
		if err != nil {
			return caller{}, err
		}
		if t, err := a.store.Team(ctx, teamID); err != nil || t.ID != c.team {
			// Whether the team exists is not the token's to learn.
			return caller{}, errs.New(errs.Unauthenticated, "the bearer token is not one of team %q's", teamID)
		}
		return c, nil
	}
	return caller{}, errs.New(errs.Unauthenticated, "missing API key: send it in the X-API-Key header (or Authorization: Bearer with X-Team-ID)")
}

// apiKey finds the team of an API key, and notes its use.
func (a *API) apiKey(ctx context.Context, key string) (caller, error) {
	k, err := a.store.APIKey(ctx, auth.HashAPIKey(key))
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			err = errs.New(errs.Unauthenticated, "invalid API key")
		}
		return caller{}, err
	}
	a.touch(ctx, k)
	return caller{team: k.Team, kind: byKey}, nil
}

// bearerToken is the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// admin checks the operator's token and finds the team it acts for.
func (a *API) admin(ctx context.Context, token, teamID string) (caller, error) {
	if a.AdminToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.AdminToken)) != 1 {
		return caller{}, errs.New(errs.Unauthenticated, "invalid admin token")
	}
	if teamID == "" {
		return caller{}, errs.New(errs.InvalidArgument, "an admin token acts for the team X-Team-ID names: send it")
	}
	t, err := a.store.Team(ctx, teamID)
	if err != nil {
		return caller{}, err
	}
	return caller{team: t.ID, kind: byAdmin}, nil
}

// touchEvery is how often a key's last use is written.
const touchEvery = time.Minute

// touch records a key's use, at most once a minute a key, in the
// background: the request does not wait for the write.
func (a *API) touch(ctx context.Context, k store.APIKey) {
	now := time.Now()
	if now.Sub(k.LastUsed) < touchEvery {
		return
	}
	if last, ok := a.touched.Load(k.Hash); ok && now.Sub(last.(time.Time)) < touchEvery {
		return
	}
	a.touched.Store(k.Hash, now)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.store.TouchAPIKey(ctx, k.Hash, now.UTC().Truncate(time.Second)); err != nil {
			a.log.Debug("record an API key's use", "err", err)
		}
	}()
}

func callerOf(r *http.Request) caller { c, _ := r.Context().Value(callerKey{}).(caller); return c }

func team(r *http.Request) string { return callerOf(r).team }

// sandboxID reads the path id; "<id>-<clientID>" forms are accepted.
func sandboxID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if i := strings.IndexByte(id, '-'); i > 0 {
		id = id[:i]
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "", errs.New(errs.InvalidArgument, "invalid sandbox id %q", r.PathValue("id"))
		}
	}
	if id == "" {
		return "", errs.New(errs.InvalidArgument, "missing sandbox id")
	}
	return id, nil
}

// decode reads a JSON body into v; an empty body leaves v as is.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &tooBig):
			return errs.New(errs.InvalidArgument, "request body is larger than %d bytes", maxBody)
		default:
			return errs.New(errs.InvalidArgument, "malformed JSON body: %v", err)
		}
	}
	return nil
}

// seconds turns a count of seconds from a request into a Duration. Counts
// beyond ±2^32 (136 years) are clamped first: multiplied out they would
// overflow and wrap, a huge timeout turning into a small or negative one.
// The service refuses anything that large with its own message.
func seconds(n int64) time.Duration {
	const limit = 1 << 32
	return time.Duration(max(min(n, limit), -limit)) * time.Second
}

// decodeSeconds reads {"<field>": seconds} from the body; a missing field
// is def, or an error when def is nil.
func decodeSeconds(w http.ResponseWriter, r *http.Request, field string, def *int64) (int64, error) {
	var body map[string]*int64
	if err := decode(w, r, &body); err != nil {
		return 0, err
	}
	if v := body[field]; v != nil {
		return *v, nil
	}
	if def == nil {
		return 0, errs.New(errs.InvalidArgument, "%s is required", field)
	}
	return *def, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is the E2B error body.
type apiError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

// toAPIError is err as E2B's Error: its status, its message and, where
// known, E2B's error_code; with the hint for the answer's headers.
func toAPIError(err error) (apiError, errs.Hint) {
	status := errs.HTTPStatus(err)
	if status == 499 {
		status = http.StatusRequestTimeout
	}
	h := errs.HintOf(err)
	code := h.Code
	if code == "" && status == http.StatusInternalServerError {
		code = errs.CodeInternal
	}
	return apiError{Code: status, Message: err.Error(), ErrorCode: code}, h
}

// writeError answers err: E2B's Error body, and what the SDKs' retries
// read (Python's from 2.60): Should-Retry where the server knows whether
// the same request may succeed, and Retry-After (seconds) on a 429 that
// may.
func writeError(w http.ResponseWriter, err error) {
	body, h := toAPIError(err)
	if h.Retry != nil {
		w.Header().Set("Should-Retry", strconv.FormatBool(*h.Retry))
		if *h.Retry && (body.Code == http.StatusTooManyRequests || h.After > 0) {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int((h.After+time.Second-1)/time.Second))))
		}
	}
	writeJSON(w, body.Code, body)
}
