// Package localca is a certificate authority Cove keeps itself: the
// server's for E2B's domain mode when the operator gives no certificate,
// and each node's egress proxy's. Its key stays where it was made.
package localca

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
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority: ECDSA P-256, ten years, path length 0.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte // Cert, PEM-encoded: what clients trust
	key  *ecdsa.PrivateKey
}

// Files of a CA kept in a directory.
const (
	CertFile = "ca.pem"
	keyFile  = "ca.key"
)

// Load reads the CA kept in dir (CertFile, and its key readable by its
// owner only), or makes one named name there (dir 0700); dir "" makes one
// in memory.
func Load(dir, name string) (*CA, error) {
	if dir == "" {
		return newCA(name)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if errors.Is(err, fs.ErrNotExist) {
		return makeCA(dir, name)
	}
	if err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, fmt.Errorf("local CA's key: %w", err)
	}
	cert, err := x509.ParseCertificate(pemBytes(certPEM, "CERTIFICATE"))
	if err != nil {
		return nil, fmt.Errorf("local CA %s: %w", filepath.Join(dir, CertFile), err)
	}
	key, err := x509.ParseECPrivateKey(pemBytes(keyPEM, "EC PRIVATE KEY"))
	if err != nil {
		return nil, fmt.Errorf("local CA's key %s: %w", filepath.Join(dir, keyFile), err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), key: key}, nil
}

func makeCA(dir, name string) (*CA, error) {
	ca, err := newCA(name)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	// The key first: a certificate is never left without its key.
	if err := writeFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	if err := writeFile(filepath.Join(dir, CertFile), ca.PEM, 0o644); err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	return ca, nil
}

func newCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	tpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Cove"}, CommonName: name + " (" + host + ")"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Issue makes a server certificate, with a key of its own, for names (DNS
// names, or IP addresses), valid for validity from an hour ago; its chain
// holds the CA.
func (ca *CA) Issue(names []string, validity time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	return ca.issue(names, key, validity)
}

// issue makes a server certificate for names with key.
func (ca *CA) issue(names []string, key *ecdsa.PrivateKey, validity time.Duration) (tls.Certificate, error) {
	tpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Cove"}, CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// pemBytes is the first block of typ in b (nil: none).
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
