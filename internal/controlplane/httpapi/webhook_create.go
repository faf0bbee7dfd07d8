package httpapi

import "net/http"

// createWebhook serves POST /events/webhooks (name, url, enabled, events,
// signatureSecret): 201 with the webhook, without its secret.
func (a *API) createWebhook(w http.ResponseWriter, r *http.Request) {
	var body webhookBody
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	hook, err := a.svc.CreateWebhook(r.Context(), team(r), body.change())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, toWebhookJSON(hook))
}
