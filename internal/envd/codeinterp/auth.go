package codeinterp

import (
	"context"
	"net/http"
)

type envKey struct{}

// guarded serves h only to a caller the agent accepts: the request's
// access token is checked (by asking the agent for the sandbox's
// environment) before h runs code or starts a kernel. h finds the
// environment with requestEnv.
//
// The official SDK sends the token on /execute only, never on the context
// calls; those (contextCall) check a token when one comes, and start no
// kernel: a context's kernel starts at its first execution.
func (s *Server) guarded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, status, err := s.sandboxEnv(r.Context(), r.Header.Get("X-Access-Token"))
		if err != nil {
			writeText(w, status, err.Error())
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), envKey{}, env)))
	}
}

// contextCall serves h, checking the request's access token first when it
// carries one (a wrong one is refused).
func (s *Server) contextCall(h http.HandlerFunc) http.HandlerFunc {
	guarded := s.guarded(h)
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Access-Token") == "" {
			h(w, r)
			return
		}
		guarded(w, r)
	}
}

// requestEnv is the sandbox's environment guarded fetched for r.
func requestEnv(r *http.Request) map[string]string {
	env, _ := r.Context().Value(envKey{}).(map[string]string)
	return env
}
