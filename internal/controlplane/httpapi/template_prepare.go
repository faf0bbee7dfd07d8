package httpapi

import "net/http"

// prepareTemplate serves POST /templates/{templateID}/prepare (Cove's own):
// a built-in template built on first use (debian, code-interpreter-v1)
// starts building unless it is built or building. 202 with the build to
// follow through the status endpoint.
func (a *API) prepareTemplate(w http.ResponseWriter, r *http.Request) {
	st, err := a.templates.Prepare(r.PathValue("templateID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{
		"templateID": r.PathValue("templateID"), "buildID": st.Build.ID, "status": st.Build.Status,
	})
}
