package httpapi

import (
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// teamAPIKey is E2B's TeamAPIKey: what a listing shows of a key.
type teamAPIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Mask      keyMask    `json:"mask"`
	CreatedAt time.Time  `json:"createdAt"`
	CreatedBy *struct{}  `json:"createdBy"` // no users: always null
	LastUsed  *time.Time `json:"lastUsed"`
}

// keyMask is E2B's IdentifierMaskingDetails.
type keyMask struct {
	Prefix            string `json:"prefix"`
	ValueLength       int    `json:"valueLength"`
	MaskedValuePrefix string `json:"maskedValuePrefix"`
	MaskedValueSuffix string `json:"maskedValueSuffix"`
}

func keyJSON(k store.APIKey) teamAPIKey {
	out := teamAPIKey{ID: k.ID(), Name: k.Name, CreatedAt: k.CreatedAt, Mask: keyMask{Prefix: "e2b_", ValueLength: 40}}
	if len(k.Mask) == 6 {
		out.Mask.MaskedValuePrefix, out.Mask.MaskedValueSuffix = k.Mask[:2], k.Mask[2:]
	}
	if !k.LastUsed.IsZero() {
		out.LastUsed = &k.LastUsed
	}
	return out
}

// listAPIKeys serves GET /api-keys: the team's keys, masked, oldest first.
func (a *API) listAPIKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := a.store.TeamAPIKeys(r.Context(), team(r))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]teamAPIKey, len(keys))
	for i, k := range keys {
		out[i] = keyJSON(k)
	}
	writeJSON(w, http.StatusOK, out)
}
