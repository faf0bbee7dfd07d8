package service

import (
	"encoding/base64"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// A webhook's signing secret is stored sealed with the operator's secrets
// key, bound to the webhook, where the API has the key, and as given where
// it has none; the stored form's prefix says which.
const (
	sealedSecret = "sealed:" // then the sealed value, base64
	plainSecret  = "plain:"  // then the secret as given
)

// storedWebhookSecret is the form of secret that webhook's record keeps.
func (s *Service) storedWebhookSecret(webhookID, secret string) string {
	switch {
	case secret == "":
		return ""
	case s.cfg.SecretsKey == nil:
		return plainSecret + secret
	}
	return sealedSecret + base64.RawStdEncoding.EncodeToString(s.cfg.SecretsKey.Seal("", webhookSealID(webhookID), secret))
}

// webhookSecret is the secret that signs webhook's deliveries, from its
// record's form ("": unsigned).
func (s *Service) webhookSecret(webhookID, stored string) (string, error) {
	switch {
	case stored == "":
		return "", nil
	case strings.HasPrefix(stored, plainSecret):
		return stored[len(plainSecret):], nil
	case !strings.HasPrefix(stored, sealedSecret):
		return "", errs.New(errs.Internal, "webhook %s: its secret is stored in no form this version knows", webhookID)
	case s.cfg.SecretsKey == nil:
		return "", errs.New(errs.Unavailable, "webhook %s: its secret is sealed, and this API has no secrets key (--secrets-key-file) to open it", webhookID)
	}
	sealed, err := base64.RawStdEncoding.DecodeString(stored[len(sealedSecret):])
	if err != nil {
		return "", errs.New(errs.Internal, "webhook %s: its sealed secret is not base64", webhookID)
	}
	return s.cfg.SecretsKey.Open("", webhookSealID(webhookID), sealed)
}

// webhookSealID is what a webhook's sealed secret is bound to: no team's
// secret has an id of this form (they are UUIDs), so neither opens as the
// other.
func webhookSealID(webhookID string) string { return "webhook/" + webhookID }
