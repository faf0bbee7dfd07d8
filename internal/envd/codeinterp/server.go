package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/envd"
)

// Port is the code interpreter's port inside a sandbox.
const Port = 49999

// Config configures a Server.
type Config struct {
	// Agent is the base URL of the sandbox's agent, whose /envs gives the
	// sandbox's environment and checks the access token.
	Agent string
	// Cwd is the default contexts' directory ("" is the user's home).
	Cwd string
	// Env is the environment kernels start with (os.Environ when nil).
	Env []string
	// Defaults are the languages whose contexts exist from the start.
	Defaults []string
	// MaxOutputBytes caps one execution's stdout and stderr (default
	// 64 MiB): past it the output is dropped, the code runs on.
	MaxOutputBytes int
	// Keepalive is the silence after which an execution's stream gets a
	// keepalive line (default 5 s).
	Keepalive time.Duration
	// InterruptGrace is how long interrupted code may take to stop before
	// its kernel is replaced by a fresh one (default 10 s).
	InterruptGrace time.Duration
	// MaxContexts caps the contexts (each a kernel process) alive at once,
	// the default ones included (default 32).
	MaxContexts int
}

// Server is the code interpreter's HTTP server.
type Server struct {
	cfg    Config
	log    *slog.Logger
	mux    *http.ServeMux
	ctxs   contexts
	assets string // the kernels' own files, written at start
	agent  *http.Client
	// startMu serializes the start of default contexts.
	startMu sync.Mutex
}

// New starts the default contexts' kernels and returns the server.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if cfg.Cwd == "" {
		cfg.Cwd = homeDir(cfg.Env)
	}
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = 64 << 20
	}
	if cfg.Keepalive == 0 {
		cfg.Keepalive = 5 * time.Second
	}
	if cfg.InterruptGrace == 0 {
		cfg.InterruptGrace = 10 * time.Second
	}
	if cfg.MaxContexts == 0 {
		cfg.MaxContexts = 32
	}
	assets, err := writeAssets()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, mux: http.NewServeMux(), assets: assets,
		ctxs:  contexts{byID: map[string]*codeContext{}, defaults: map[string]*codeContext{}},
		agent: &http.Client{Timeout: 10 * time.Second}}
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("POST /execute", s.guarded(s.execute))
	s.mux.HandleFunc("POST /contexts", s.contextCall(s.createContext))
	s.mux.HandleFunc("GET /contexts", s.contextCall(s.listContexts))
	s.mux.HandleFunc("POST /contexts/{id}/restart", s.contextCall(s.restartContext))
	s.mux.HandleFunc("DELETE /contexts/{id}", s.contextCall(s.deleteContext))
	for _, l := range cfg.Defaults {
		if _, err := s.newContext(ctx, l, cfg.Cwd, true, true); err != nil {
			s.Close()
			return nil, fmt.Errorf("default %s context: %w", l, err)
		}
	}
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every context's kernel.
func (s *Server) Close() {
	for _, c := range s.ctxs.list() {
		if c, ok := s.ctxs.remove(c.ID); ok {
			if k := c.kernel(); k != nil {
				_ = k.close()
			}
		}
	}
	os.RemoveAll(s.assets)
}

// Serve serves ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error { return envd.Serve(ctx, ln, s) }

// newContext adds a context of language in cwd, its kernel started now
// or (start false) at its first execution.
func (s *Server) newContext(ctx context.Context, language, cwd string, asDefault, start bool) (*codeContext, error) {
	lang, err := normalizeLanguage(language)
	if err != nil {
		return nil, err
	}
	if cwd == "" {
		cwd = s.cfg.Cwd
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return nil, errBadRequest{fmt.Sprintf("cwd %q is not a directory", cwd)}
	}
	if !s.ctxs.reserve(s.cfg.MaxContexts) {
		return nil, errTooMany{fmt.Sprintf("this sandbox has %d code contexts, at most %d: remove one (DELETE /contexts/{id}) first", s.cfg.MaxContexts, s.cfg.MaxContexts)}
	}
	var k kernel
	if start {
		if k, err = s.startKernel(ctx, lang, cwd); err != nil {
			s.ctxs.unreserve()
			return nil, err
		}
	}
	c := &codeContext{ID: newID(), Language: lang, Cwd: cwd, created: time.Now(), lock: make(chan struct{}, 1), k: k}
	s.ctxs.add(c, asDefault)
	return c, nil
}

// errBadRequest is the client's fault: a 400 with its text.
type errBadRequest struct{ msg string }

func (e errBadRequest) Error() string { return e.msg }

// errTooMany refuses a context past Config.MaxContexts: a 429 with its
// text.
type errTooMany struct{ msg string }

func (e errTooMany) Error() string { return e.msg }

// contextError answers an error of newContext or defaultContext.
func (s *Server) contextError(w http.ResponseWriter, what string, err error) {
	var bad errBadRequest
	var many errTooMany
	switch {
	case errors.As(err, &bad):
		writeText(w, http.StatusBadRequest, bad.msg)
	case errors.As(err, &many):
		writeText(w, http.StatusTooManyRequests, many.msg)
	default:
		s.log.Error(what, "err", err)
		writeText(w, http.StatusInternalServerError, err.Error())
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, "OK")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

func homeDir(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok && v != "" {
			return v
		}
	}
	return "/"
}
