package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// nodeTLS reads a cluster role's node API certificates: the server's and
// the client's settings, the same certificate and CA on both sides (nil
// when none are configured).
func nodeTLS(cfg Config) (server, client *tls.Config, err error) {
	set := 0
	for _, f := range []string{cfg.NodeTLSCert, cfg.NodeTLSKey, cfg.NodeTLSCA} {
		if f != "" {
			set++
		}
	}
	switch set {
	case 0:
		return nil, nil, nil
	case 3:
	default:
		return nil, nil, fmt.Errorf("the node API's TLS needs all of --node-tls-cert, --node-tls-key and --node-tls-ca")
	}
	cert, err := tls.LoadX509KeyPair(cfg.NodeTLSCert, cfg.NodeTLSKey)
	if err != nil {
		return nil, nil, fmt.Errorf("node TLS certificate: %w", err)
	}
	pem, err := os.ReadFile(cfg.NodeTLSCA)
	if err != nil {
		return nil, nil, fmt.Errorf("node TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("node TLS CA %s: no PEM certificate", cfg.NodeTLSCA)
	}
	// A client certificate is checked if given; requireClientCert refuses
	// every request without one but the probes' /healthz.
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	client = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: cfg.NodeTLSServerName}
	return server, client, nil
}

// requireClientCert refuses a node API request over TLS that presented
// no certificate of the cluster's CA (/healthz aside: a probe's).
func requireClientCert(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			http.Error(w, "a client certificate of the cluster's CA is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
