package httpapi

import (
	"encoding/json"
	"net/http"
)

// resumeBody is ConnectSandbox and the resume request: timeout (seconds),
// memory (false asks for a fresh boot over the sandbox's files).
type resumeBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
	// AutoPause (the deprecated resume's): a sandbox keeps the lifecycle
	// of its create.
	AutoPause json.RawMessage `json:"autoPause"`
	// CPUCount (the deprecated resume's): a sandbox resumes with the size
	// it was paused with.
	CPUCount json.RawMessage `json:"cpuCount"`
}

// decodeResume reads a resume's timeout and whether it reboots.
func decodeResume(w http.ResponseWriter, r *http.Request) (int64, bool, error) {
	var body resumeBody
	if err := decode(w, r, &body); err != nil {
		return 0, false, err
	}
	if err := notServed(rawField{"autoPause", body.AutoPause}, rawField{"cpuCount", body.CPUCount}); err != nil {
		return 0, false, err
	}
	reboot := body.Memory != nil && !*body.Memory
	if body.Timeout == nil {
		return defaultTimeout, reboot, nil
	}
	return *body.Timeout, reboot, nil
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
	timeout, reboot, err := decodeResume(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, resumed, err := a.svc.Connect(r.Context(), team(r), id, seconds(timeout), reboot)
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
