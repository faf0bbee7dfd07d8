package envd

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
)

// Authorized reports whether r carries a credential the agent whose token
// is token accepts: the token header, or, on GET and POST /files, a valid
// signature. The proxy asks before it wakes a paused sandbox for r.
func Authorized(r *http.Request, token string) bool {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(tokenHeader)), []byte(token)) == 1 {
		return true
	}
	op := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if r.URL.Path != "/files" || op == "" {
		return false
	}
	q := r.URL.Query()
	return checkSignature(q, op, q.Get("username"), token) == nil
}

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
	if tok := s.settings.AccessToken(); tok != "" && !s.settings.TokenOK(r.Header.Get(tokenHeader)) {
		if err := checkSignature(q, op, username, tok); err != nil {
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

func checkSignature(q url.Values, op, username, token string) error {
	sig := q.Get("signature")
	if sig == "" {
		return errUnauthorized
	}
	var exp int64
	if v := q.Get("signature_expiration"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errs.New(errs.Unauthenticated, "invalid signature expiration")
		}
		if n < time.Now().Unix() {
			return errs.New(errs.Unauthenticated, "signature is already expired")
		}
		exp = n
	}
	want := envdwire.Signature(q.Get("path"), op, username, token, exp)
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return errs.New(errs.Unauthenticated, "invalid signature")
	}
	return nil
}
