package network

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/secrets"
)

// policy is what the egress proxy enforces for one sandbox: the firewall's
// verdict for what it redirected (its own allowOut/denyOut, egress on or
// off), the names allowOut lets through, and the rules that transform
// requests.
type policy struct {
	team        string // whose sandbox it is: its connections count in the team's share
	workload    Workload
	internet    bool
	allow, deny []netip.Prefix
	domains     []string
	rules       Rules
	upstream    *EgressProxy // nil: out directly
}

// proxied: the sandbox's ports 80 and 443 (every TCP port, with an
// upstream) go through the proxy.
func (p *policy) proxied() bool { return len(p.domains) > 0 || len(p.rules) > 0 || p.upstream != nil }

// egressVerdict is what a sandbox's policy says of a connection.
type egressVerdict int

const (
	denied    egressVerdict = iota
	byAddress               // its rules let the address through
	byName                  // only allowOut's name does: the name must lead there
)

// allows says whether the sandbox may reach dst, asking for name there,
// and why.
func (p *policy) allows(dst netip.Addr, name string) egressVerdict {
	switch {
	case !p.internet:
		return denied
	case slices.ContainsFunc(p.allow, func(a netip.Prefix) bool { return a.Contains(dst) }):
		return byAddress
	case !slices.ContainsFunc(p.deny, func(d netip.Prefix) bool { return d.Contains(dst) }):
		return byAddress
	case name != "" && matchDomain(name, p.domains):
		return byName
	}
	return denied
}

// transform serves the HTTP requests of a connection for name (from its
// TLS SNI or its first Host) whose rules transform them. TLS is
// terminated with a certificate of the node's CA; each request is sent on
// to dst — over TLS that verifies dst's certificate for name, as a client
// would — with the rules' headers set. Plain HTTP is sent on only when
// name resolves, on the node, to dst: otherwise a sandbox could dial any
// address with a Host that draws a secret.
func (p *egressProxy) transform(fl *flow, c net.Conn, br *bufio.Reader, src, dst netip.AddrPort, name string, overTLS bool, pol *policy) {
	conn := net.Conn(peeked(c, br))
	if overTLS {
		conn = tls.Server(conn, &tls.Config{
			NextProtos: []string{"http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return p.ca.leaf(name)
			},
		})
	} else if !p.resolvesTo(name, dst.Addr()) {
		p.log.Info("egress refused: a transformed name over plain HTTP not at its address", "sandbox", src.Addr().String(), "name", name, "dst", dst.String())
		refuse(conn, http.StatusForbidden, "cove egress: "+name+" does not resolve to "+dst.Addr().String()+" on this node; its rules apply only there")
		return
	}
	scheme := "http"
	if overTLS {
		scheme = "https"
	}
	rp, done := p.reverseProxy(fl, pol, src, dst, name, scheme)
	defer done()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !strings.EqualFold(strings.TrimSuffix(host, "."), name) {
			http.Error(w, "cove egress: this connection was opened for "+name, http.StatusMisdirectedRequest)
			return
		}
		pol, ok := p.policyOf(src.Addr())
		if !ok || pol.allows(dst.Addr(), name) == denied {
			http.Error(w, "cove egress: "+name+" is not allowed", http.StatusForbidden)
			return
		}
		for _, rule := range pol.rules.Match(name) {
			if rule.Transform == nil {
				continue
			}
			for k, v := range rule.Transform.Headers {
				val, err := secrets.Expand(v, func(secret string) (string, error) {
					if p.secrets == nil {
						return "", errors.New("this node reveals no secrets")
					}
					return p.secrets.Reveal(r.Context(), pol.workload.Team, secret)
				}, func(token string) (string, error) {
					t, ok := pol.workload.Tokens[token]
					if !ok {
						return "", fmt.Errorf("the sandbox has no workload token %q (iam.tokens)", token)
					}
					issuer := p.identity.Load()
					if issuer == nil {
						return "", errors.New("this node mints no workload identity tokens")
					}
					return issuer.Mint(pol.workload.Team, pol.workload.Sandbox, t.Audience, time.Now())
				})
				if err != nil {
					p.log.Info("egress transform: a placeholder did not resolve", "sandbox", src.Addr().String(), "name", name, "header", k, logx.Err(err))
					http.Error(w, fmt.Sprintf("cove egress: header %s for %s: %v", k, name, err), http.StatusBadGateway)
					return
				}
				r.Header.Set(k, val)
			}
		}
		rp.ServeHTTP(w, r)
	})
	serveOne(conn, handler)
}

// byName serves the plain-HTTP requests of a connection that only
// allowOut's names let through: each request's Host is checked as the
// first one's was (an allowed name that leads to dst on the node), so a
// kept-alive connection cannot ask the server at dst for another name
// (domain fronting). A request for a name not allowed is answered 403 and
// ends the connection.
func (p *egressProxy) byName(fl *flow, c net.Conn, br *bufio.Reader, src, dst netip.AddrPort, pol *policy) {
	rp, done := p.reverseProxy(fl, pol, src, dst, "", "http")
	defer done()
	serveOne(peeked(c, br), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		now, ok := p.policyOf(src.Addr())
		if ok {
			switch now.allows(dst.Addr(), host) {
			case denied:
				ok = false
			case byName:
				ok = p.resolvesTo(host, dst.Addr())
			}
		}
		if !ok {
			p.log.Info("egress refused: a later request of a connection for another name", "sandbox", src.Addr().String(), "name", host, "dst", dst.String())
			w.Header().Set("Connection", "close")
			http.Error(w, "cove egress: "+host+" is not allowed at "+dst.Addr().String()+" (each request of a connection is checked)", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}))
}

// reverseProxy sends the requests it is given to dst, on connections of
// the flow (over TLS that verifies dst's certificate for name when scheme
// is https); done closes those left idle.
func (p *egressProxy) reverseProxy(fl *flow, pol *policy, src, dst netip.AddrPort, name, scheme string) (rp *httputil.ReverseProxy, done func()) {
	upstream := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			up, err := p.dial(ctx, pol, dst)
			if err != nil {
				return nil, err
			}
			return fl.attachClosing(up)
		},
		TLSClientConfig:       &tls.Config{ServerName: name, RootCAs: p.upstreamRoots, NextProtos: []string{"http/1.1"}},
		ForceAttemptHTTP2:     false,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, pr.In.Host, pr.In.Host
		},
		Transport:     upstream,
		FlushInterval: -1, // streamed answers (server-sent events) pass as they come
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.log.Debug("egress upstream", "sandbox", src.Addr().String(), "name", r.Host, logx.Err(err))
			http.Error(w, "cove egress: "+r.Host+": "+err.Error(), http.StatusBadGateway)
		},
	}
	return rp, upstream.CloseIdleConnections
}

// resolvesTo says whether name leads to addr on the node (nameResolver).
func (p *egressProxy) resolvesTo(name string, addr netip.Addr) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := p.names.resolvesTo(ctx, name, addr)
	return err == nil && ok
}

// refuse answers a plain-HTTP request it will not send on with status
// and why, and closes the connection.
func refuse(c net.Conn, status int, why string) {
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, http.StatusText(status), len(why)+1, why)
	c.Close()
}

// serveOne serves HTTP on one connection until it closes (or is taken
// over: an upgrade, which the reverse proxy carries on).
func serveOne(c net.Conn, h http.Handler) {
	done := make(chan struct{})
	var once sync.Once
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				once.Do(func() { close(done) })
			}
		},
	}
	_ = srv.Serve(&oneConn{c: c, done: done})
}

// oneConn is a listener of one connection: its second Accept waits until
// that connection is done.
type oneConn struct {
	c    net.Conn
	done chan struct{}
	used bool
}

func (l *oneConn) Accept() (net.Conn, error) {
	if !l.used {
		l.used = true
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

// bufferedConn reads what the name check peeked before the rest.
type bufferedConn struct {
	net.Conn
	head []byte
}

// peeked is c, whose first bytes br read, with those bytes first: a copy
// of them, so that br's buffer (16 KiB) is not kept for the connection's
// life.
func peeked(c net.Conn, br *bufio.Reader) *bufferedConn {
	head, _ := br.Peek(br.Buffered())
	return &bufferedConn{Conn: c, head: bytes.Clone(head)}
}

func (c *bufferedConn) Read(b []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(b, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}
