package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
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
// keyFile), or one for api.<domain>, *.<domain> and <domain> issued by a
// local CA Cove keeps in <dataDir>/tls (made on first use; clients trust
// its ca.pem, e.g. with NODE_EXTRA_CA_CERTS). caPath is "" with the
// operator's certificate.
func tlsConfig(dataDir, domain, certFile, keyFile string) (cfg *tls.Config, caPath string, err error) {
	var cert tls.Certificate
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, "", errors.New("--tls-cert and --tls-key go together")
		}
		if cert, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, "", fmt.Errorf("load the TLS certificate: %w", err)
		}
	} else {
		host := domain
		if h, _, err := net.SplitHostPort(domain); err == nil {
			host = h
		}
		dir := filepath.Join(dataDir, "tls")
		ca, err := localca.Load(dir, "Cove local CA")
		if err != nil {
			return nil, "", err
		}
		names := []string{host, "api." + host, "*." + host}
		if net.ParseIP(host) != nil {
			names = []string{host}
		}
		if cert, err = ca.Issue(names, 365*24*time.Hour); err != nil {
			return nil, "", err
		}
		caPath = filepath.Join(dir, localca.CertFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caPath, nil
}
