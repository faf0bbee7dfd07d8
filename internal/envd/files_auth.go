package envd

import (
	"net/http"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/envd/identity"
)

// filesRequest is what GET and POST /files share: who, where, and whether
// the caller may.
type filesRequest struct {
	user identity.User
	path string // absolute; "" when the request names none
}

// authorizeFiles checks the token header or the signature for op and
// resolves the user and the path query.
func (s *Server) authorizeFiles(r *http.Request, op string) (filesRequest, error) {
	q := r.URL.Query()
	username := q.Get("username")
	if tok := s.settings.AccessToken(); tok != "" && !s.settings.TokenOK(r.Header.Get(envdwire.TokenHeader)) {
		if err := envdwire.CheckSignature(q, op, username, tok); err != nil {
			return filesRequest{}, err
		}
	}
	u, err := identity.Resolve(username, s.settings.DefaultUser())
	if err != nil {
		return filesRequest{}, err
	}
	out := filesRequest{user: u}
	if p := q.Get("path"); p != "" {
		if out.path, err = identity.ExpandPath(u, p, ""); err != nil {
			return filesRequest{}, err
		}
	}
	return out, nil
}
