// Package secrets seals teams' secret values with a key the operator
// holds (not the database), checks their names and reads the
// "${e2b.secrets.NAME}" placeholders of network rules. It imports nothing
// of the control plane: the node's egress proxy uses it too.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
)

// KeySize is the size of the operator's key: AES-256.
const KeySize = 32

// Key seals and opens secret values (AES-256-GCM). What a value is sealed
// for — its team and its secret's id — is authenticated with it, so a
// sealed value copied to another secret's or team's record does not open.
type Key struct{ aead cipher.AEAD }

// LoadKey reads the key file at path: 64 hex digits (32 bytes), readable
// by its owner only. With create, a missing file is made with a new
// random key.
func LoadKey(path string, create bool) (*Key, error) {
	var fresh func() ([]byte, error)
	if create {
		fresh = func() ([]byte, error) {
			b := make([]byte, KeySize)
			rand.Read(b)
			return []byte(hex.EncodeToString(b) + "\n"), nil
		}
	}
	raw, err := fsutil.ReadKeyFile(path, fresh)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(b) != KeySize {
		return nil, fmt.Errorf("secrets key %s: want %d hex digits (openssl rand -hex %d)", path, 2*KeySize, KeySize)
	}
	return NewKey(b)
}

// NewKey makes a key of 32 bytes.
func NewKey(b []byte) (*Key, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("secrets key: want %d bytes, have %d", KeySize, len(b))
	}
	block, err := aes.NewCipher(b)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// Seal encrypts a secret's value for its team and id: a random nonce,
// then the ciphertext.
func (k *Key) Seal(team, id, value string) []byte {
	nonce := make([]byte, k.aead.NonceSize())
	rand.Read(nonce)
	return k.aead.Seal(nonce, nonce, []byte(value), boundTo(team, id))
}

// Open decrypts what Seal sealed for the same team and id.
func (k *Key) Open(team, id string, sealed []byte) (string, error) {
	n := k.aead.NonceSize()
	if len(sealed) < n {
		return "", errs.New(errs.Internal, "secret %s: its sealed value is cut short", id)
	}
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], boundTo(team, id))
	if err != nil {
		return "", errs.New(errs.Internal, "secret %s does not open with this secrets key (another key sealed it)", id)
	}
	return string(plain), nil
}

func boundTo(team, id string) []byte { return []byte("cove secret\x00" + team + "\x00" + id) }
