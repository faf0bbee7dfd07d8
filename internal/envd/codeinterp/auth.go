package codeinterp

import (
	"context"
	"net/http"
)

type envKey struct{}

// guarded serves h only to a caller the agent accepts: the request's
// access token is checked (by asking the agent for the sandbox's
// environment) before h starts a kernel or touches a context. h finds the
// environment with requestEnv.
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

// requestEnv is the sandbox's environment guarded fetched for r.
func requestEnv(r *http.Request) map[string]string {
	env, _ := r.Context().Value(envKey{}).(map[string]string)
	return env
}
