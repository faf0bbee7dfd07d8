package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/covesandbox/cove/internal/errs"
)

// listSecrets serves GET /secrets (?limit=, default 100, &nextToken=): a
// page of the team's secrets by name; X-Next-Token names the next page,
// absent on the last.
func (a *API) listSecrets(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			writeError(w, errs.New(errs.InvalidArgument, "limit %q: not a number", l))
			return
		}
		limit = n
	}
	after, err := base64.RawURLEncoding.DecodeString(q.Get("nextToken"))
	if err != nil {
		writeError(w, errs.New(errs.InvalidArgument, "nextToken: not one this API gave"))
		return
	}
	page, next, err := a.svc.ListSecrets(r.Context(), team(r), string(after), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	if next != "" {
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(next)))
	}
	out := make([]secretJSON, 0, len(page))
	for _, s := range page {
		out = append(out, toSecretJSON(s))
	}
	writeJSON(w, http.StatusOK, out)
}
