package httpapi

import "net/http"

// deleteWebhook serves DELETE /events/webhooks/{webhookID}: 204; what was
// on its way to it is dropped.
func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteWebhook(r.Context(), team(r), r.PathValue("webhookID")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
