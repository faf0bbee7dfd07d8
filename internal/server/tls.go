package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// serveTLS serves handler over HTTPS on cfg.TLSListen (errors of the
// running server go to errc) and says how clients reach it.
func serveTLS(cfg Config, handler http.Handler, errc chan<- error, log *slog.Logger) (*http.Server, error) {
	tc, caPath, err := tlsConfig(cfg.DataDir, cfg.Domain, cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.TLSListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.TLSListen, err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: tc, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 640 * time.Second}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
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
		ca, caKey, err := localCA(dir)
		if err != nil {
			return nil, "", err
		}
		if cert, err = issue(ca, caKey, host); err != nil {
			return nil, "", err
		}
		caPath = filepath.Join(dir, "ca.pem")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caPath, nil
}

// localCA loads the CA in dir, or makes it: ca.pem (public) and ca.key
// (0600), in a 0700 directory.
func localCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if certPEM, err := os.ReadFile(certPath); err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("read the local CA's key: %w", err)
		}
		cb, kb := pemBytes(certPEM, "CERTIFICATE"), pemBytes(keyPEM, "EC PRIVATE KEY")
		ca, err := x509.ParseCertificate(cb)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", certPath, err)
		}
		key, err := x509.ParseECPrivateKey(kb)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
		}
		return ca, key, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Cove"}, CommonName: "Cove local CA (" + host + ")"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

// issue makes a certificate for api.host, *.host and host, valid a year,
// kept in memory only (a start issues a new one).
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Cove"}, CommonName: "*." + host},
		DNSNames:     []string{host, "api." + host, "*." + host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.DNSNames, tmpl.IPAddresses = nil, []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}, nil
}

func pemBytes(b []byte, typ string) []byte {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil
		}
		if block.Type == typ {
			return block.Bytes
		}
	}
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
