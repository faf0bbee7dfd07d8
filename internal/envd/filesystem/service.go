// Package filesystem implements the agent's filesystem.Filesystem Connect
// service: stat, list, create, move and remove paths as a sandbox user, and
// watch directories through fsnotify.
package filesystem

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
)

// Service implements filesystemconnect.FilesystemHandler.
type Service struct {
	settings *settings.Settings
	log      *slog.Logger

	mu       sync.Mutex
	watchers map[string]*pollWatcher
}

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// New returns a Service.
func New(st *settings.Settings, log *slog.Logger) *Service {
	return &Service{settings: st, log: log, watchers: map[string]*pollWatcher{}}
}

// resolve returns the request's user and p made absolute for that user.
func (s *Service) resolve(h http.Header, p string) (identity.User, string, error) {
	name, err := identity.NameFromBasicAuth(h)
	if err != nil {
		return identity.User{}, "", err
	}
	u, err := identity.Resolve(name, s.settings.DefaultUser())
	if err != nil {
		return identity.User{}, "", err
	}
	abs, err := identity.ExpandPath(u, p, "")
	return u, abs, err
}
