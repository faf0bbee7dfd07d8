package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/covesandbox/cove/internal/connguard"
)

// failing is a listener whose first n accepts fail as a process out of
// descriptors sees them.
type failing struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (f *failing) Accept() (net.Conn, error) {
	f.mu.Lock()
	if f.n > 0 {
		f.n--
		f.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	f.mu.Unlock()
	return f.Listener.Accept()
}

// TestBothListenerSurvivesEMFILE: the port that speaks HTTP and HTTPS
// goes on serving both after accepts failed with EMFILE (it used to stop
// at the first, closing the port for good).
func TestBothListenerSurvivesEMFILE(t *testing.T) {
	t.Parallel()
	tc, caPath, err := tlsConfig(t.TempDir(), "localhost", "", "")
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	guard, err := connguard.New(connguard.Limits{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln := listenBoth(guard.Listen(&failing{Listener: tcp, n: 3}), tc, guard.Wait())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, map[bool]string{false: "http", true: "https"}[r.TLS != nil])
	})}
	guard.Serve(srv)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	port := tcp.Addr().(*net.TCPAddr).Port
	for _, scheme := range []string{"http", "https", "http"} {
		resp, err := client.Get(scheme + "://127.0.0.1:" + strconv.Itoa(port) + "/")
		if err != nil {
			t.Fatalf("%s after failed accepts: %v", scheme, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != scheme {
			t.Errorf("%s: answer %q", scheme, body)
		}
	}
	if s := guard.Status().Listeners[0]; !s.Accepting || s.AcceptErrors != 3 {
		t.Errorf("status: %+v", s)
	}
}
