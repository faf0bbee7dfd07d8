// Package ids makes the random identifiers Cove hands out (sandboxes,
// templates, volumes): lowercase letters and digits, as E2B's ids are.
package ids

import "crypto/rand"

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
