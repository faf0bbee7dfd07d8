package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/svid"
)

// identityDiscovery serves GET /.well-known/openid-configuration, without
// a key: the OpenID Connect discovery document of the sandboxes' workload
// tokens, what a cloud's token exchange reads to trust them.
func (a *API) identityDiscovery(w http.ResponseWriter, r *http.Request) {
	a.identityDocument(w, (*svid.Issuer).Discovery)
}

// identityKeys serves GET /.well-known/jwks.json, without a key: the
// public keys the workload tokens verify with.
func (a *API) identityKeys(w http.ResponseWriter, r *http.Request) {
	a.identityDocument(w, (*svid.Issuer).JWKS)
}

func (a *API) identityDocument(w http.ResponseWriter, doc func(*svid.Issuer) ([]byte, error)) {
	iss, err := a.svc.Identity()
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := doc(iss)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(b)
}
