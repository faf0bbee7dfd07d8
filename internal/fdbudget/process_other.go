//go:build !linux

package fdbudget

import "errors"

// Process is Linux's only.
func Process() (*Budget, error) {
	return nil, errors.New("descriptor budget: not on this system")
}
