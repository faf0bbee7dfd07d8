package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// resumeBody is ConnectSandbox and the resume request: timeout (seconds),
// memory (false asks for a fresh boot over the sandbox's files).
type resumeBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
	// OnResume (E2B 2.66's connect): "restore" or "reboot", or
	// {action, memoryMB, cpuCount}; the sizes are not served.
	OnResume json.RawMessage `json:"onResume"`
	// AutoPause (the deprecated resume's): a sandbox keeps the lifecycle
	// of its create.
	AutoPause json.RawMessage `json:"autoPause"`
	// CPUCount (the deprecated resume's) and MemoryMB: a sandbox resumes
	// with the size it was paused with.
	CPUCount json.RawMessage `json:"cpuCount"`
	MemoryMB json.RawMessage `json:"memoryMB"`
}

// decodeResume reads a resume's timeout and whether it reboots.
func decodeResume(w http.ResponseWriter, r *http.Request) (int64, bool, error) {
	var body resumeBody
	if err := decode(w, r, &body); err != nil {
		return 0, false, err
	}
	if err := notServed(rawField{"autoPause", body.AutoPause}, rawField{"cpuCount", body.CPUCount}, rawField{"memoryMB", body.MemoryMB}); err != nil {
		return 0, false, err
	}
	reboot := body.Memory != nil && !*body.Memory
	if len(body.OnResume) > 0 && string(body.OnResume) != "null" {
		action, err := onResume(body.OnResume)
		if err != nil {
			return 0, false, err
		}
		if body.Memory != nil && *body.Memory == (action == "reboot") {
			return 0, false, errs.New(errs.InvalidArgument, "memory %t contradicts onResume %q", *body.Memory, action)
		}
		reboot = action == "reboot"
	}
	if body.Timeout == nil {
		return defaultTimeout, reboot, nil
	}
	return *body.Timeout, reboot, nil
}

// onResume reads a connect's onResume: its action ("restore", the
// default, or "reboot"); a size in it is refused, naming it.
func onResume(raw json.RawMessage) (string, error) {
	var v struct {
		Action   string          `json:"action"`
		MemoryMB json.RawMessage `json:"memoryMB"`
		CPUCount json.RawMessage `json:"cpuCount"`
	}
	if err := json.Unmarshal(raw, &v.Action); err != nil {
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", errs.New(errs.InvalidArgument, "onResume: want \"restore\", \"reboot\" or {action, memoryMB, cpuCount}")
		}
		if err := notServed(rawField{"onResume.memoryMB", v.MemoryMB}, rawField{"onResume.cpuCount", v.CPUCount}); err != nil {
			return "", err
		}
	}
	switch v.Action {
	case "", "restore":
		return "restore", nil
	case "reboot":
		return "reboot", nil
	}
	return "", errs.New(errs.InvalidArgument, "onResume action %q: want restore or reboot", v.Action)
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
