package httpapi

import "net/http"

// listWebhooks serves GET /events/webhooks: the team's webhooks.
func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request) {
	hooks, err := a.svc.Webhooks(r.Context(), team(r))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]webhookJSON, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, toWebhookJSON(h))
	}
	writeJSON(w, http.StatusOK, out)
}
