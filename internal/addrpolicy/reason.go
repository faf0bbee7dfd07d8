package addrpolicy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"syscall"
)

// Reason is what a tenant may read of a failed connection to a far end
// it named: a fixed phrase for the error's class, or the policy's
// refusal. Never the far end's words: its body, headers, status text or
// certificate's names, which may hold what only the host was to see.
func Reason(err error) string {
	var refused *Refused
	var dns *net.DNSError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &refused):
		return refused.Error()
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.As(err, &dns):
		return "the name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to the address"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid):
		return "its TLS certificate is not trusted"
	case errors.As(err, &record) || errors.As(err, &alert):
		return "the TLS handshake failed"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	return "the request failed"
}
