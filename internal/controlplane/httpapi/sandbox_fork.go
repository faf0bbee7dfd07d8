package httpapi

import (
	"net/http"
)

// forkResultJSON is E2B's SandboxForkResult: the child, or its error.
type forkResultJSON struct {
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
	Error   *apiError    `json:"error,omitempty"`
}

// fork serves POST /sandboxes/{id}/fork ({"timeout": s = 15, "count": n
// = 1}): 201 with one result per child, a sandbox or the error that kept
// it from starting.
func (a *API) fork(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var body struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	timeout, count := int64(15), 1
	if body.Timeout != nil {
		timeout = *body.Timeout
	}
	if body.Count != nil {
		count = *body.Count
	}
	results, err := a.svc.Fork(r.Context(), team(r), id, count, seconds(timeout))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]forkResultJSON, len(results))
	for i, res := range results {
		if res.Err != nil {
			e, _ := toAPIError(res.Err)
			out[i].Error = &e
			continue
		}
		sb := toSandbox(res.Sandbox)
		out[i].Sandbox = &sb
	}
	writeJSON(w, http.StatusCreated, out)
}
