package httpapi

import (
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
)

// secretJSON is E2B's Secret: a secret's metadata, never its value.
type secretJSON struct {
	SecretID       string            `json:"secretID"`
	Name           string            `json:"name"`
	CurrentVersion int64             `json:"currentVersion"`
	Metadata       map[string]string `json:"metadata"`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

func toSecretJSON(s store.TeamSecret) secretJSON {
	meta := s.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return secretJSON{SecretID: s.ID, Name: s.Name, CurrentVersion: s.Version, Metadata: meta, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}
