package network

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/covesandbox/cove/internal/errs"
)

// EgressProxy is an upstream SOCKS5 proxy (RFC 1928, with RFC 1929
// credentials when Username is set) that a sandbox's outbound TCP goes
// through, from the node: the sandbox neither reaches it nor sees its
// credentials (E2B's SandboxEgressProxyConfig).
type EgressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// TLS, when set, runs the whole exchange with the proxy — handshake,
	// credentials, tunneled bytes — inside TLS (1.2 or newer), its
	// certificate always verified (E2B's egressProxy.tls). In a request it
	// is true, or an object naming the server and the CA.
	TLS *ProxyTLS `json:"tls,omitempty"`
}

// ProxyTLS is how the node verifies an upstream proxy over TLS.
type ProxyTLS struct {
	// ServerName is the name its certificate must carry (and SNI); empty:
	// the host of Address.
	ServerName string `json:"serverName,omitempty"`
	// CACert is the PEM of the CAs that may sign it; empty: the roots the
	// node verifies upstreams with (the system's unless the operator gave
	// others).
	CACert string `json:"caCert,omitempty"`
}

// UnmarshalJSON takes tls as E2B's API gives it: true, false, null or
// {enabled?, serverName?, caCert?} (the Python SDK's form; enabled false
// is no TLS).
func (e *EgressProxy) UnmarshalJSON(b []byte) error {
	type plain EgressProxy
	var v struct {
		plain
		TLS json.RawMessage `json:"tls"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = EgressProxy(v.plain)
	switch string(v.TLS) {
	case "", "null", "false":
		e.TLS = nil
	case "true":
		e.TLS = &ProxyTLS{}
	default:
		var t struct {
			ProxyTLS
			Enabled *bool `json:"enabled"`
		}
		if err := json.Unmarshal(v.TLS, &t); err != nil {
			return fmt.Errorf("egressProxy.tls: want true, false or {enabled, serverName, caCert}: %w", err)
		}
		if t.Enabled != nil && !*t.Enabled {
			e.TLS = nil
		} else {
			e.TLS = &t.ProxyTLS
		}
	}
	return nil
}

// Check checks an upstream proxy's form: host:port, credentials of at
// most 255 bytes, a password only with a username.
func (e *EgressProxy) Check() error {
	host, port, err := net.SplitHostPort(e.Address)
	if err != nil || host == "" {
		return errs.New(errs.InvalidArgument, "egressProxy.address %q: want host:port", e.Address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errs.New(errs.InvalidArgument, "egressProxy.address %q: a port from 1 to 65535", e.Address)
	}
	if len(e.Username) > 255 || len(e.Password) > 255 {
		return errs.New(errs.InvalidArgument, "egressProxy: a username and a password have at most 255 bytes")
	}
	if e.Password != "" && e.Username == "" {
		return errs.New(errs.InvalidArgument, "egressProxy: a password needs a username")
	}
	if t := e.TLS; t != nil {
		if len(t.ServerName) > 253 {
			return errs.New(errs.InvalidArgument, "egressProxy.tls.serverName: at most 253 bytes")
		}
		if len(t.CACert) > 8192 {
			return errs.New(errs.InvalidArgument, "egressProxy.tls.caCert: at most 8192 bytes")
		}
		if t.CACert != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CACert)) {
			return errs.New(errs.InvalidArgument, "egressProxy.tls.caCert: no PEM certificate in it")
		}
	}
	return nil
}

// tlsConfig is how the node dials the proxy over TLS; roots verify it
// when the proxy names no CA (nil: the system's).
func (t *ProxyTLS) tlsConfig(address string, roots *x509.CertPool) *tls.Config {
	name := t.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(address)
	}
	if t.CACert != "" {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM([]byte(t.CACert))
	}
	return &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// tlsDialer dials a proxy over TLS: SOCKS5 runs inside.
type tlsDialer struct {
	net.Dialer
	cfg *tls.Config
}

func (d *tlsDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

func (d *tlsDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := d.Dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, d.cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return c, nil
}
