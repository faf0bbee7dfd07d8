package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
)

// resumeBody is ConnectSandbox and the resume request: timeout (seconds),
// memory (false asks for a fresh boot over the sandbox's files).
type resumeBody struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
	// OnResume (E2B 2.66's connect): "restore" or "reboot", or
	// {action, memoryMB, cpuCount}.
	OnResume json.RawMessage `json:"onResume"`
	// AutoPause (the deprecated resume's): a sandbox keeps the lifecycle
	// of its create.
	AutoPause json.RawMessage `json:"autoPause"`
	// CPUCount and MemoryMB (the deprecated resume's cpuCount, E2B 2.66's
	// connect's both) are onResume's sizes given beside it.
	CPUCount *int `json:"cpuCount"`
	MemoryMB *int `json:"memoryMB"`
}

// resumeAsk is what a connect or resume asks of a paused sandbox's
// resume.
type resumeAsk struct {
	timeout int64
	reboot  bool
	// size is the CPUs and memory it resumes with (zero fields: its own);
	// a connect to a running sandbox leaves its size alone.
	size isolation.Limits
}

// decodeResume reads a resume's timeout, whether it reboots and the size
// it resumes with.
func decodeResume(w http.ResponseWriter, r *http.Request) (resumeAsk, error) {
	var body resumeBody
	if err := decode(w, r, &body); err != nil {
		return resumeAsk{}, err
	}
	if err := notServed(rawField{"autoPause", body.AutoPause}); err != nil {
		return resumeAsk{}, err
	}
	ask := resumeAsk{timeout: defaultTimeout, reboot: body.Memory != nil && !*body.Memory}
	cpus, mem := body.CPUCount, body.MemoryMB
	if len(body.OnResume) > 0 && string(body.OnResume) != "null" {
		on, err := onResume(body.OnResume)
		if err != nil {
			return resumeAsk{}, err
		}
		if body.Memory != nil && *body.Memory == (on.Action == "reboot") {
			return resumeAsk{}, errs.New(errs.InvalidArgument, "memory %t contradicts onResume %q", *body.Memory, on.Action)
		}
		ask.reboot = on.Action == "reboot"
		if cpus, err = oneOf("cpuCount", cpus, on.CPUCount); err != nil {
			return resumeAsk{}, err
		}
		if mem, err = oneOf("memoryMB", mem, on.MemoryMB); err != nil {
			return resumeAsk{}, err
		}
	}
	size, err := sandboxSize(cpus, mem)
	if err != nil {
		return resumeAsk{}, err
	}
	ask.size = size
	if body.Timeout != nil {
		ask.timeout = *body.Timeout
	}
	return ask, nil
}

// oneOf is a size given beside onResume (top) or in it (in): both only
// when they agree.
func oneOf(name string, top, in *int) (*int, error) {
	if top != nil && in != nil && *top != *in {
		return nil, errs.New(errs.InvalidArgument, "%s %d contradicts onResume.%s %d", name, *top, name, *in)
	}
	if in != nil {
		return in, nil
	}
	return top, nil
}

// resumeSize is onResume as an object.
type resumeSize struct {
	Action   string `json:"action"`
	MemoryMB *int   `json:"memoryMB"`
	CPUCount *int   `json:"cpuCount"`
}

// onResume reads a connect's onResume: its action ("restore", the
// default, or "reboot") and the size it asks for.
func onResume(raw json.RawMessage) (resumeSize, error) {
	var v resumeSize
	if err := json.Unmarshal(raw, &v.Action); err != nil {
		if err := json.Unmarshal(raw, &v); err != nil {
			return v, errs.New(errs.InvalidArgument, "onResume: want \"restore\", \"reboot\" or {action, memoryMB, cpuCount}")
		}
	}
	switch v.Action {
	case "", "restore":
		v.Action = "restore"
		return v, nil
	case "reboot":
		return v, nil
	}
	return v, errs.New(errs.InvalidArgument, "onResume action %q: want restore or reboot", v.Action)
}

// connect serves POST /sandboxes/{id}/connect and its v2 form: a paused
// sandbox is resumed (201), with the size onResume asks for, and ends
// timeout from now; a running one lives at least timeout from now (200),
// its size as it is (E2B: onResume's sizes apply only to a resume).
func (a *API) connect(w http.ResponseWriter, r *http.Request) {
	id, err := sandboxID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ask, err := decodeResume(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	sb, resumed, err := a.svc.Connect(r.Context(), team(r), id, seconds(ask.timeout), ask.reboot, ask.size)
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
