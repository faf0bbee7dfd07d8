package service

import (
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/secrets"
)

// TestWebhookSecretForms: with the operator's key a webhook's secret is
// stored sealed for that webhook (not in the clear, and opening for no
// other webhook nor with another key); without one, as given; a sealed
// secret needs the key; a form no version wrote is refused.
func TestWebhookSecretForms(t *testing.T) {
	key := func(b byte) *secrets.Key {
		k, err := secrets.NewKey([]byte(strings.Repeat(string(b), secrets.KeySize)))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	withKey := &Service{cfg: Config{SecretsKey: key('a')}, log: logx.Discard()}
	otherKey := &Service{cfg: Config{SecretsKey: key('b')}, log: logx.Discard()}
	noKey := &Service{log: logx.Discard()}
	sealed := withKey.storedWebhookSecret("w1", "the secret")
	if !strings.HasPrefix(sealed, sealedSecret) || strings.Contains(sealed, "the secret") || sealed == withKey.storedWebhookSecret("w1", "the secret") {
		t.Errorf("sealed form %q: want sealed, not in the clear, with a fresh nonce", sealed)
	}
	plain := noKey.storedWebhookSecret("w1", "the secret")
	for _, c := range []struct {
		name    string
		s       *Service
		webhook string
		stored  string
		want    string
		fails   bool
	}{
		{"sealed, opened", withKey, "w1", sealed, "the secret", false},
		{"sealed, for another webhook", withKey, "w2", sealed, "", true},
		{"sealed, another key", otherKey, "w1", sealed, "", true},
		{"sealed, no key", noKey, "w1", sealed, "", true},
		{"plain, no key", noKey, "w1", plain, "the secret", false},
		{"plain, with a key", withKey, "w1", plain, "the secret", false},
		{"unsigned", withKey, "w1", withKey.storedWebhookSecret("w1", ""), "", false},
		{"unknown form", withKey, "w1", "the secret", "", true},
		{"sealed, not base64", withKey, "w1", sealedSecret + "!!", "", true},
	} {
		got, err := c.s.webhookSecret(c.webhook, c.stored)
		if got != c.want || (err != nil) != c.fails {
			t.Errorf("%s: %q, %v; want %q (fails: %v)", c.name, got, err, c.want, c.fails)
		}
	}
}
