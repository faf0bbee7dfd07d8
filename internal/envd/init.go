package envd

import (
	"encoding/json"
	"maps"
	"net/http"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
)

// InitRequest is the body of POST /init, which the node sends the agent
// before a sandbox is handed out.
type InitRequest struct {
	EnvVars        map[string]string `json:"envVars,omitempty"`
	AccessToken    *string           `json:"accessToken,omitempty"`
	Timestamp      string            `json:"timestamp,omitempty"`
	DefaultUser    string            `json:"defaultUser,omitempty"`
	DefaultWorkdir *string           `json:"defaultWorkdir,omitempty"`
	// NewBoot (Cove's own): the sandbox booted anew, from another's memory
	// (a microVM's boot snapshot): it takes a boot id of its own.
	NewBoot bool `json:"coveNewBoot,omitempty"`
	// EgressCA (Cove's own) is the node's egress CA in PEM, for a sandbox
	// whose requests its rules transform: the sandbox trusts it.
	EgressCA string `json:"coveEgressCA,omitempty"`
	// Resolvers (Cove's own), when set, replace the nameservers of the
	// sandbox's /etc/resolv.conf (E2B's network.dnsServers).
	Resolvers []string `json:"coveResolvers,omitempty"`
}

// init applies the node's settings. Once a token is set, changing anything
// needs that token, so code inside the sandbox cannot take the agent over.
func (s *Server) init(w http.ResponseWriter, r *http.Request) {
	if !s.settings.TokenOK(r.Header.Get(envdwire.TokenHeader)) {
		writeError(w, envdwire.ErrUnauthorized)
		return
	}
	var req InitRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, errs.New(errs.InvalidArgument, "decode init request: %v", err))
			return
		}
	}
	if req.DefaultUser != "" {
		if _, err := identity.Lookup(req.DefaultUser); err != nil {
			writeError(w, errs.New(errs.InvalidArgument, "default user %q does not exist", req.DefaultUser))
			return
		}
	}
	if req.NewBoot && s.newBoot != nil {
		if err := s.newBoot(); err != nil {
			writeError(w, err)
			return
		}
	}
	if len(req.Resolvers) > 0 {
		if err := writeResolvers("/etc/resolv.conf", req.Resolvers); err != nil {
			writeError(w, err)
			return
		}
	}
	env := req.EnvVars
	if req.EgressCA != "" {
		vars, err := trustEgressCA(req.EgressCA, s.settings.EnvVars())
		if err != nil {
			writeError(w, err)
			return
		}
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		for k, v := range vars {
			if _, set := env[k]; !set {
				env[k] = v
			}
		}
	}
	s.settings.Apply(settings.Update{
		EnvVars:        env,
		AccessToken:    req.AccessToken,
		DefaultUser:    req.DefaultUser,
		DefaultWorkdir: req.DefaultWorkdir,
	})
	w.Header().Set("X-Envd-Version", envdwire.Version)
	w.WriteHeader(http.StatusNoContent)
}
