package httpapi

import (
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
)

// webhookJSON is a webhook as the API shows it: never its secret.
type webhookJSON struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamID"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
}

func toWebhookJSON(w store.Webhook) webhookJSON {
	return webhookJSON{ID: w.ID, TeamID: w.Team, Name: w.Name, URL: w.URL, Enabled: w.Enabled, Events: w.Events, CreatedAt: w.CreatedAt}
}

// webhookBody is a create's or an update's body.
type webhookBody struct {
	Name            *string   `json:"name"`
	URL             *string   `json:"url"`
	Enabled         *bool     `json:"enabled"`
	Events          *[]string `json:"events"`
	SignatureSecret *string   `json:"signatureSecret"`
}

func (b webhookBody) change() service.WebhookChange {
	return service.WebhookChange{Name: b.Name, URL: b.URL, Enabled: b.Enabled, Events: b.Events, Secret: b.SignatureSecret}
}
