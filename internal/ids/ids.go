// Package ids makes the random identifiers Cove hands out (sandboxes,
// templates, volumes): lowercase letters and digits, as E2B's ids are.
package ids

import (
	"crypto/rand"
	"fmt"
)

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// New returns prefix followed by n random characters of [a-z0-9].
func New(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// UUID returns a random (version 4) UUID, the form E2B gives builds, API
// keys and teams.
func UUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
