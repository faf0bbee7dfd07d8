package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// resumeBody is ConnectSandbox and the resume request: timeout (seconds),
// memory (false asks for a fresh boot, not available yet).
type resumeBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

func decodeResume(w http.ResponseWriter, r *http.Request) (int64, error) {
	var body resumeBody
	if err := decode(w, r, &body); err != nil {
		return 0, err
	}
	if body.Memory != nil && !*body.Memory {
		return 0, errs.New(errs.Unimplemented, "resuming without memory (a fresh boot) is not available yet")
	}
	if body.Timeout == nil {
		return defaultTimeout, nil
	}
	return *body.Timeout, nil
}

// connect serves POST /sandboxes/{id}/connect and its v2 form: a paused
// sandbox is resumed (201) and ends timeout from now; a running one lives
// at least timeout from now (200).
func (a *API) connect(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	timeout, err := decodeResume(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, resumed, err := a.svc.Connect(r.Context(), team(r), id, seconds(timeout))
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, toSandbox(sb))
}
