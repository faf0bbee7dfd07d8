// Package envd is Cove's in-sandbox agent: the E2B envd wire protocol
// over connectrpc.com/connect plus its HTTP
// endpoints, served on port 49983 inside every sandbox.
package envd

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/envd/filesystem"
	"github.com/covesandbox/cove/internal/envd/process"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// Config configures the agent.
type Config struct {
	// Fixed are environment variables every process sees (E2B_SANDBOX_ID …).
	Fixed map[string]string
	// Process configures the process service (PID 1 reaping, OOM counter).
	Process process.Options
	// NewBoot, when set, gives the sandbox a new boot id (an /init's
	// coveNewBoot).
	NewBoot func() error
}

// compressMinBytes is the smallest RPC message the agent compresses.
const compressMinBytes = 4096

// Server is the agent's HTTP handler and state.
type Server struct {
	settings *settings.Settings
	log      *slog.Logger
	mux      *http.ServeMux
	process  *process.Service
	newBoot  func() error
}

// New builds the agent.
func New(cfg Config, log *slog.Logger) *Server {
	s := &Server{settings: settings.New(cfg.Fixed), log: log, mux: http.NewServeMux(), newBoot: cfg.NewBoot}
	s.process = process.New(s.settings, log, cfg.Process)
	// Small messages (most process events) go uncompressed: gzip costs
	// more than it saves on them, and its first use allocates a compressor
	// of over half a megabyte in every sandbox.
	small := connect.WithCompressMinBytes(compressMinBytes)
	procPath, procHandler := processconnect.NewProcessHandler(s.process, small)
	fsPath, fsHandler := filesystemconnect.NewFilesystemHandler(filesystem.New(s.settings, log), small)
	s.mux.Handle(procPath, s.requireTokenRPC(procHandler))
	s.mux.Handle(fsPath, s.requireTokenRPC(fsHandler))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("POST /init", s.init)
	s.mux.Handle("GET /envs", s.requireToken(http.HandlerFunc(s.envs)))
	s.mux.Handle("GET /metrics", s.requireToken(http.HandlerFunc(s.metrics)))
	s.mux.HandleFunc("GET /files", s.download)
	s.mux.HandleFunc("POST /files", s.upload)
	return s
}

// ServeHTTP adds permissive CORS, as envd does, and dispatches.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "*")
	h.Set("Access-Control-Expose-Headers", "*")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// requireToken refuses requests without the access token once one is set.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.settings.TokenOK(r.Header.Get(envdwire.TokenHeader)) {
			writeError(w, envdwire.ErrUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// rpcErrors writes errors in the protocol of the request (Connect, gRPC…).
var rpcErrors = connect.NewErrorWriter()

// requireTokenRPC is requireToken for the Connect services: the refusal is
// a Connect error ("unauthenticated") the SDKs map to AuthenticationError.
func (s *Server) requireTokenRPC(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.settings.TokenOK(r.Header.Get(envdwire.TokenHeader)) {
			_ = rpcErrors.Write(w, r, connect.NewError(connect.CodeUnauthenticated, envdwire.ErrUnauthorized))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeError writes envd's JSON error body {"message","code"}.
func writeError(w http.ResponseWriter, err error) {
	status := errs.HTTPStatus(err)
	writeJSON(w, status, map[string]any{"code": status, "message": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
