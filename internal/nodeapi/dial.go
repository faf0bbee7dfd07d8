package nodeapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/pipe"
)

// dialProtocol is the Upgrade token of the byte stream to a sandbox port.
const dialProtocol = "cove-dial"

// serveDial connects the caller to a port inside a sandbox: after the
// 101 the connection is the port's, both ways, until either side closes.
func (s *Server) serveDial(w http.ResponseWriter, r *http.Request) {
	if err := s.check(r.Header); err != nil {
		httpError(w, err)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), dialProtocol) {
		httpError(w, errs.New(errs.InvalidArgument, "want Upgrade: %s", dialProtocol))
		return
	}
	id := r.URL.Query().Get("id")
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		httpError(w, errs.New(errs.InvalidArgument, "port %q: want 1 to 65535", r.URL.Query().Get("port")))
		return
	}
	upstream, err := s.mgr.Dial(r.Context(), id, port)
	if err != nil {
		httpError(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		httpError(w, errs.New(errs.Internal, "the connection cannot be taken over"))
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		s.log.Warn("take over a dial's connection", logx.SandboxID(id), logx.Err(err))
		return
	}
	if !s.tunnel(client, id) { // the node is stopping
		client.Close()
		upstream.Close()
		return
	}
	defer s.untunnel(client)
	if _, err := io.WriteString(client, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+dialProtocol+"\r\n\r\n"); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	// What the caller sent after its request, read ahead, goes first.
	if n := buf.Reader.Buffered(); n > 0 {
		if _, err := io.CopyN(upstream, buf.Reader, int64(n)); err != nil {
			client.Close()
			upstream.Close()
			return
		}
	}
	pipe.Splice(client, upstream)
}

// httpError answers a plain HTTP request with err's status and kind.
func httpError(w http.ResponseWriter, err error) {
	w.Header().Set(errs.KindHeader, errs.KindOf(err).String())
	http.Error(w, err.Error(), errs.HTTPStatus(err))
}

// dial opens the byte stream to port inside sandbox id on the node at base.
func dial(ctx context.Context, base *url.URL, tlsConfig *tls.Config, token, id string, port int) (net.Conn, error) {
	host := base.Host
	if base.Port() == "" {
		host = net.JoinHostPort(base.Hostname(), map[bool]string{true: "443", false: "80"}[base.Scheme == "https"])
	}
	d := net.Dialer{Timeout: 2 * time.Second} // a gone node answers nothing
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("node %s: %w", base.Host, err))
	}
	if base.Scheme == "https" {
		cfg := tlsConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = base.Hostname()
		}
		conn = tls.Client(conn, cfg)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	q := url.Values{"id": {id}, "port": {strconv.Itoa(port)}}
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: strings.TrimSuffix(base.Path, "/") + "/dial", RawQuery: q.Encode()},
		Host: base.Host, Header: http.Header{"Authorization": {"Bearer " + token}, "Connection": {"Upgrade"}, "Upgrade": {dialProtocol}},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("node %s: %w", base.Host, err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("node %s: %w", base.Host, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		conn.Close()
		kind, _ := errs.KindNamed(resp.Header.Get(errs.KindHeader))
		return nil, errs.New(kind, "node %s: %s", base.Host, strings.TrimSpace(string(body)))
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &readAhead{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// readAhead is a connection whose first bytes a reader took already.
type readAhead struct {
	net.Conn
	r *bufio.Reader
}

func (c *readAhead) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *readAhead) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
