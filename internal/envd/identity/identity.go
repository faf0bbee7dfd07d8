// Package identity resolves the user a request acts as and the paths it
// names, the way envd does: Basic auth carries the user name, "~" and
// relative paths resolve against that user's home.
package identity

import (
	"encoding/base64"
	"net/http"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// User is a resolved account inside the sandbox.
type User struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32
	Home   string
}

// Lookup resolves name through the sandbox's /etc/passwd and /etc/group.
// Without an entry, root is uid 0 and a number is that uid (an image may
// have no /etc/passwd, or run as a bare uid as Docker's USER allows).
func Lookup(name string) (User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if name == "root" {
			return User{Name: "root", Home: "/root"}, nil
		}
		if id, perr := strconv.ParseUint(name, 10, 32); perr == nil {
			if u, err := user.LookupId(name); err == nil {
				return Lookup(u.Username)
			}
			return User{Name: name, UID: uint32(id), GID: uint32(id), Home: "/"}, nil
		}
		return User{}, errs.New(errs.Unauthenticated, "invalid username: '%s'", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return User{}, errs.New(errs.Internal, "user %s has a non-numeric id", name)
	}
	out := User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				out.Groups = append(out.Groups, uint32(n))
			}
		}
	}
	if out.Home == "" {
		out.Home = "/"
	}
	return out, nil
}

// NameFromBasicAuth returns the user name carried by an
// "Authorization: Basic base64(user:)" header, or "" when absent.
func NameFromBasicAuth(h http.Header) (string, error) {
	v := h.Get("Authorization")
	if v == "" {
		return "", nil
	}
	scheme, payload, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return "", errs.New(errs.Unauthenticated, "invalid authorization header")
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name, nil
}

// Resolve returns the named user, or def when name is empty.
func Resolve(name, def string) (User, error) {
	if name == "" {
		name = def
	}
	if name == "" {
		name = "root"
	}
	return Lookup(name)
}

// ExpandPath turns p into an absolute, cleaned path for u: "~" and "~/x"
// expand to the home directory, relative paths resolve against base (the
// home directory when base is empty).
func ExpandPath(u User, p, base string) (string, error) {
	if base == "" {
		base = u.Home
	}
	switch {
	case p == "":
		return "", errs.New(errs.InvalidArgument, "path is empty")
	case strings.ContainsRune(p, 0) || strings.ContainsRune(base, 0):
		return "", errs.New(errs.InvalidArgument, "path contains a NUL byte")
	case p == "~":
		p = u.Home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(u.Home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p), nil
}
