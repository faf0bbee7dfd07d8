package httpapi

import (
	"encoding/json"
	"net/http"
	"time"
)

// deliveryJSON is a delivery a webhook has still to take (Cove's own).
type deliveryJSON struct {
	ID            string    `json:"id"`
	EventID       string    `json:"eventID"`
	EventType     string    `json:"eventType"`
	SandboxID     string    `json:"sandboxID"`
	Attempts      int       `json:"attempts"` // failed so far
	NextAttemptAt time.Time `json:"nextAttemptAt"`
	LastError     string    `json:"lastError,omitempty"`
}

// webhookDeliveries serves GET /events/webhooks/{webhookID}/deliveries:
// what the webhook has still to take, by when each is due — those not
// tried yet and those whose attempts failed, with why the last one did.
// A delivery taken or given up is no longer there.
func (a *API) webhookDeliveries(w http.ResponseWriter, r *http.Request) {
	ds, err := a.svc.WebhookDeliveries(r.Context(), team(r), r.PathValue("webhookID"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]deliveryJSON, len(ds))
	for i, d := range ds {
		var e struct {
			Type      string `json:"type"`
			SandboxID string `json:"sandboxId"`
		}
		_ = json.Unmarshal(d.Body, &e)
		out[i] = deliveryJSON{ID: d.ID, EventID: d.EventID, EventType: e.Type, SandboxID: e.SandboxID, Attempts: d.Attempt,
			NextAttemptAt: d.NextAt, LastError: d.LastError}
	}
	writeJSON(w, http.StatusOK, out)
}
