package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/localca"
)

// serveTLS serves handler over HTTPS on cfg.TLSListen (errors of the
// running server go to errc) and says how clients reach it.
// Its connections count against guard until they authenticate.
func serveTLS(cfg Config, handler http.Handler, guard *connguard.Guard, errc chan<- error, log *slog.Logger) (*http.Server, error) {
	tc, caPath, err := tlsConfig(cfg.DataDir, cfg.Domain, cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.TLSListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.TLSListen, err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: tc, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 640 * time.Second}
	guard.Serve(srv)
	guarded := guard.Listen(ln)
	go func() {
		if err := srv.ServeTLS(guarded, "", ""); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	attrs := []any{"addr", ln.Addr().String(), "api", "https://api." + cfg.Domain, "sandboxes", "https://<port>-<id>." + cfg.Domain,
		"sdk", "E2B_DOMAIN=" + cfg.Domain + " E2B_API_KEY=<key>"}
	if caPath != "" {
		attrs = append(attrs, "trust", "NODE_EXTRA_CA_CERTS="+caPath+" (Python: SSL_CERT_FILE or REQUESTS_CA_BUNDLE)")
	}
	log.Info("HTTPS (E2B's domain mode) listening", attrs...)
	return srv, nil
}

// tlsConfig is the HTTPS listener's certificate: the operator's (certFile,
// keyFile), or certificates issued by a local CA Cove keeps in
// <dataDir>/tls (made on first use; clients trust its ca.pem, e.g. with
// NODE_EXTRA_CA_CERTS): one for <domain>, api.<domain> and *.<domain>, and
// one for each sandbox host {port}-{id}.<domain> a client names (SNI),
// since OpenSSL, rustls and Node refuse *.localhost for
// 8080-<id>.localhost (a wildcard directly under a single-label name).
// caPath is "" with the operator's certificate.
func tlsConfig(dataDir, domain, certFile, keyFile string) (cfg *tls.Config, caPath string, err error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, "", errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("load the TLS certificate: %w", err)
		}
		return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, "", nil
	}
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	dir := filepath.Join(dataDir, "tls")
	ca, err := localca.Load(dir, "Cove local CA")
	if err != nil {
		return nil, "", err
	}
	names := []string{host, "api." + host, "*." + host}
	if net.ParseIP(host) != nil {
		names = []string{host}
	}
	cert, err := ca.Issue(names, certValidity)
	if err != nil {
		return nil, "", err
	}
	cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if net.ParseIP(host) == nil {
		hosts, err := ca.Leaves(maxHostCerts, certValidity)
		if err != nil {
			return nil, "", err
		}
		cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := strings.ToLower(hello.ServerName)
			if !sandboxHost(name, host) {
				return nil, nil // the certificate above
			}
			return hosts.Get(name)
		}
	}
	return cfg, filepath.Join(dir, localca.CertFile), nil
}

// certValidity is how long the local CA's server certificates are good
// for; a sandbox host's is made again after half of it.
const certValidity = 365 * 24 * time.Hour

// maxHostCerts bounds the sandbox hosts' certificates kept, 3.5 KiB each:
// clients name hosts before they authenticate, so past it the least
// recently named is made again when next named. Making one (an ECDSA P-256
// signature, which Go checks, and parsing) took 0.2 ms of CPU here, a
// fifth of what a handshake costs its two ends.
const maxHostCerts = 1024

// sandboxHost reports whether name is {port}-{id}.<domainHost>, a sandbox
// host as the SDKs name it (the id may carry E2B's -<clientID>): a port of
// 1 to 65535 written as a number is, and one DNS label of lowercase
// letters, digits and hyphens.
func sandboxHost(name, domainHost string) bool {
	label, ok := strings.CutSuffix(name, "."+domainHost)
	if !ok || label == "" || len(label) > 63 {
		return false
	}
	portStr, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(portStr)
	if !ok || err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portStr || id == "" || strings.HasSuffix(id, "-") {
		return false
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
