// Package settings holds what the node tells the agent through POST /init:
// global environment variables, the access token and the default user and
// working directory. Every service reads them through one *Settings.
package settings

import (
	"crypto/subtle"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Settings is safe for concurrent use.
type Settings struct {
	mu             sync.RWMutex
	envVars        map[string]string
	accessToken    string
	defaultUser    string
	defaultWorkdir string
}

// New returns settings with the fixed variables every process sees.
func New(fixed map[string]string) *Settings {
	s := &Settings{envVars: map[string]string{"E2B_SANDBOX": "true"}, defaultUser: "root"}
	maps.Copy(s.envVars, fixed)
	return s
}

// Update is one POST /init.
type Update struct {
	EnvVars        map[string]string
	AccessToken    *string
	DefaultUser    string
	DefaultWorkdir *string
}

// Apply merges an /init request.
func (s *Settings) Apply(u Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.envVars, u.EnvVars)
	if u.AccessToken != nil {
		s.accessToken = *u.AccessToken
	}
	if u.DefaultUser != "" {
		s.defaultUser = u.DefaultUser
	}
	if u.DefaultWorkdir != nil {
		s.defaultWorkdir = *u.DefaultWorkdir
	}
}

// EnvVars returns a copy of the global environment variables.
func (s *Settings) EnvVars() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.envVars)
}

// DefaultUser is the user for requests that name none.
func (s *Settings) DefaultUser() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaultUser
}

// DefaultWorkdir is the working directory for processes that name none ("" = home).
func (s *Settings) DefaultWorkdir() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaultWorkdir
}

// AccessToken returns the token ("" = none set, everything allowed).
func (s *Settings) AccessToken() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.accessToken
}

// TokenOK reports whether tok grants access: always when no token is set.
func (s *Settings) TokenOK(tok string) bool {
	want := s.AccessToken()
	return want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(tok)) == 1
}

// KeepaliveInterval is how long a stream may stay silent before a
// keepalive: the request's Keepalive-Ping-Interval (seconds), else 90 s.
func KeepaliveInterval(h http.Header) time.Duration {
	if n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 90 * time.Second
}
