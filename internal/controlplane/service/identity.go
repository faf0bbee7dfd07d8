package service

import (
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/svid"
)

// Identity is the issuer of the sandboxes' workload tokens, whose keys the
// API publishes; NotFound without one.
func (s *Service) Identity() (*svid.Issuer, error) {
	if s.cfg.Identity == nil {
		return nil, errs.New(errs.NotFound, "this deployment mints no workload identity tokens: its operator gave no identity key (--identity-key-file)")
	}
	return s.cfg.Identity, nil
}
