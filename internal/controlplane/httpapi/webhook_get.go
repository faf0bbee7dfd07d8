package httpapi

import "net/http"

// getWebhook serves GET /events/webhooks/{webhookID}.
func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) {
	hook, err := a.svc.Webhook(r.Context(), team(r), r.PathValue("webhookID"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(hook))
}
