package envd

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/covesandbox/cove/internal/errs"
)

// Where the node's egress CA goes: its own file, the system's bundle
// (Debian's path, which OpenSSL, curl, Python's ssl and Go read) and the
// variables the usual runtimes read besides.
const (
	egressCAFile   = "/etc/ssl/certs/cove-egress-ca.pem"
	systemBundle   = "/etc/ssl/certs/ca-certificates.crt"
	egressCABegin  = "# cove egress CA: begin\n"
	egressCAEnd    = "# cove egress CA: end\n"
	maxBundleBytes = 16 << 20
)

// trustEgressCA makes the sandbox trust the node's egress CA (an /init's
// coveEgressCA): the certificates the egress proxy shows for names whose
// requests it transforms are signed by it. A bundle that held another
// node's CA gets this one in its place. It returns the variables that
// point runtimes at it, for those the sandbox does not set itself.
func trustEgressCA(caPEM string, env map[string]string) (map[string]string, error) {
	block, _ := pem.Decode([]byte(caPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errs.New(errs.InvalidArgument, "egress CA: not a PEM certificate")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, errs.New(errs.InvalidArgument, "egress CA: %v", err)
	}
	cert := pem.EncodeToMemory(block)
	if err := os.MkdirAll(filepath.Dir(egressCAFile), 0o755); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if err := os.WriteFile(egressCAFile, cert, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	bundle, err := os.ReadFile(systemBundle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(systemBundle), 0o755); err != nil {
			return nil, fmt.Errorf("egress CA: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("egress CA: %w", err)
	case len(bundle) > maxBundleBytes:
		return nil, fmt.Errorf("egress CA: %s is larger than %d bytes", systemBundle, maxBundleBytes)
	}
	if i := bytes.Index(bundle, []byte(egressCABegin)); i >= 0 {
		rest := bundle[i:]
		if j := bytes.Index(rest, []byte(egressCAEnd)); j >= 0 {
			bundle = append(bundle[:i:i], rest[j+len(egressCAEnd):]...)
		} else {
			bundle = bundle[:i]
		}
	}
	if len(bundle) > 0 && !bytes.HasSuffix(bundle, []byte("\n")) {
		bundle = append(bundle, '\n')
	}
	bundle = append(append(append(bundle, egressCABegin...), cert...), egressCAEnd...)
	if err := os.WriteFile(systemBundle, bundle, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	vars := map[string]string{}
	for k, v := range map[string]string{"SSL_CERT_FILE": systemBundle, "REQUESTS_CA_BUNDLE": systemBundle, "NODE_EXTRA_CA_CERTS": egressCAFile} {
		if _, set := env[k]; !set {
			vars[k] = v
		}
	}
	return vars, nil
}
