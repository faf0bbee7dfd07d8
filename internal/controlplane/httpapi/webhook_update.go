package httpapi

import "net/http"

// updateWebhook serves PATCH /events/webhooks/{webhookID}: the fields
// given replace the webhook's.
func (a *API) updateWebhook(w http.ResponseWriter, r *http.Request) {
	var body webhookBody
	if err := decode(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	hook, err := a.svc.UpdateWebhook(r.Context(), team(r), r.PathValue("webhookID"), body.change())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(hook))
}
