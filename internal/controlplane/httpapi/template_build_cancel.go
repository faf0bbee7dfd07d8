package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/covesandbox/cove/internal/template"
)

// cancelWait bounds how long a cancel waits for its build to end: its
// build sandbox's processes killed and what it wrote removed.
const cancelWait = time.Minute

// cancelledBuild is the answer to a cancel: the build as it is then.
type cancelledBuild struct {
	TemplateID string       `json:"templateID"`
	BuildID    string       `json:"buildID"`
	Status     string       `json:"status"`
	Reason     *buildReason `json:"reason,omitempty"`
}

// cancelTemplateBuild serves POST /templates/{templateID}/builds/{buildID}/cancel
// (Cove's own; E2B has no cancel): the team's unfinished build stops, its
// processes and build sandboxes go, and it ends as "error" with a reason
// saying it was cancelled. 200 once it ended, 202 when it is still ending
// after cancelWait; 409 for a build that had ended already.
func (a *API) cancelTemplateBuild(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), cancelWait)
	defer cancel()
	b, err := a.templates.CancelBuild(ctx, team(r), r.PathValue("templateID"), r.PathValue("buildID"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := cancelledBuild{TemplateID: r.PathValue("templateID"), BuildID: b.ID, Status: b.Status}
	if b.Status == template.StatusError {
		out.Reason = &buildReason{Message: b.Reason, Step: b.ReasonStep, LogEntries: []buildLogEntry{}}
	}
	code := http.StatusOK
	if b.Unfinished() {
		code = http.StatusAccepted
	}
	writeJSON(w, code, out)
}
