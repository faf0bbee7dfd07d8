package security_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/covesandbox/cove/internal/isolation/hostproc"
	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// The test's networks: the host's end of its veth holds hostOnlyAddr, an
// address of the host's own that is neither private nor loopback (TEST-NET-2);
// its namespace holds registryAddr, a private address beyond it.
const (
	hostOnlyAddr = "198.51.100.77"
	registryAddr = "10.77.0.2"
	registryNet  = "10.77.0.0/30"
	hostSecret   = "HOST-ONLY-SECRET-42"
)

// hostOnly is a service of the host's own, on loopback and on the host's
// own address: what only the host was to see.
type hostOnly struct {
	port int
	hits atomic.Int64
}

// TestTenantRequestsStayOffTheHost: a team's image pull and webhooks, as a
// tenant makes them through the API, never reach a service listening only
// on the host's own addresses, whatever the registry's token realm or
// redirects say; a registry on a private network is pulled from only in
// the operator's --registry-allow; and nothing a far end answers (its
// body, its status text) reaches the build's log, its status or a
// delivery's record.
func TestTenantRequestsStayOffTheHost(t *testing.T) {
	testkit.NeedRoot(t, "makes a veth and a network namespace")
	ns := registryNetwork(t)
	svc := serveHostOnly(t)
	hostOnlyURL := func(host string) string { return fmt.Sprintf("http://%s:%d", host, svc.port) }

	// The registries, in the namespace: 5000 an honest one; the others
	// send the node to the host-only service.
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	serveIn(t, ns, 5000, inner)
	challenge := func(realm string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Www-Authenticate", `Bearer realm="`+realm+`",service="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
		})
	}
	redirect := func(what, to string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/"+what+"/") {
				http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	cases := []struct {
		name    string
		port    int
		handler http.Handler
		repo    string
		// byPolicy: refused by the address policy (the others, IP literals
		// of private ranges, go-containerregistry refuses first).
		byPolicy bool
	}{
		{"token realm on loopback", 5001, challenge(hostOnlyURL("127.0.0.1") + "/token"), "team/ok", false},
		{"token realm on the host's address", 5002, challenge(hostOnlyURL(hostOnlyAddr) + "/token"), "team/ok", true},
		{"token realm named localhost", 5003, challenge(hostOnlyURL("localhost") + "/token"), "team/ok", true},
		{"manifest redirected to the host's address", 5004, redirect("manifests", hostOnlyURL(hostOnlyAddr)), "team/ok", true},
		{"blob redirected to loopback", 5005, redirect("blobs", hostOnlyURL("127.0.0.1")), "team/b1", false},
		{"blob redirected to the host's address", 5006, redirect("blobs", hostOnlyURL(hostOnlyAddr)), "team/b2", true},
	}
	for _, c := range cases {
		serveIn(t, ns, c.port, c.handler)
	}
	for _, repo := range []string{"team/ok", "team/b1", "team/b2"} {
		push(t, fmt.Sprintf("%s:5000/%s:v1", registryAddr, repo))
	}
	// A webhook receiver in the namespace whose answer's status text and
	// body are what only it knows.
	serveIn(t, ns, 5009, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, _ := w.(http.Hijacker)
		conn, buf, err := hj.Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		body := `{"password_hash":"` + hostSecret + `"}`
		fmt.Fprintf(buf, "HTTP/1.1 500 password_hash=%s\r\nContent-Length: %d\r\nX-Secret: %s\r\nConnection: close\r\n\r\n%s", hostSecret, len(body), hostSecret, body)
		buf.Flush()
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// checkBuild builds from image and returns its error, failing the test
	// if the host-only service's secret shows anywhere the team reads.
	checkBuild := func(t *testing.T, c *cove.Client, srv testutil.Server, tpl, image string) error {
		t.Helper()
		var logs strings.Builder
		built, err := c.BuildTemplate(ctx, cove.TemplateBuild{Name: tpl, FromImage: image}, func(l cove.BuildLog) { logs.WriteString(l.Message + "\n") })
		status := ""
		if built.TemplateID != "" {
			status = getStatus(t, srv, built)
		}
		if seen := fmt.Sprint(err) + logs.String() + status; strings.Contains(seen, hostSecret) {
			t.Errorf("build from %s: the host-only service's answer reached the team:\n%s", image, seen)
		}
		return err
	}

	// Without --registry-allow, the registry's private address is refused.
	plain := newCove(t, "", "--network=false", "--pool-size", "0")
	err := checkBuild(t, client(t, plain.srv), plain.srv, "private-registry", registryAddr+":5000/team/ok:v1")
	var be *cove.BuildError
	if !errors.As(err, &be) || !strings.Contains(be.Message, "is private") || !strings.Contains(be.Message, "--registry-allow") {
		t.Errorf("a registry on a private network without --registry-allow: %v, want refused naming the flag", err)
	}

	p := newCove(t, "", "--network=false", "--pool-size", "0", "--registry-allow", registryNet, "--webhook-allow", registryNet)
	c := client(t, p.srv)
	t.Run("pulls", func(t *testing.T) {
		if err := checkBuild(t, c, p.srv, "allowed-registry", registryAddr+":5000/team/ok:v1"); err != nil {
			t.Fatalf("a registry in --registry-allow: %v", err)
		}
		for i, tc := range cases {
			image := fmt.Sprintf("%s:%d/%s:v1", registryAddr, tc.port, tc.repo)
			err := checkBuild(t, c, p.srv, fmt.Sprintf("hostile-%d", i), image)
			if !errors.As(err, &be) || tc.byPolicy && !strings.Contains(be.Message, "--registry-allow") {
				t.Errorf("%s: %v, want the build refused", tc.name, err)
				continue
			}
			t.Logf("%s: %s", tc.name, be.Message)
		}
	})
	t.Run("webhooks", func(t *testing.T) {
		for _, url := range []string{hostOnlyURL("127.0.0.1") + "/hook", hostOnlyURL(hostOnlyAddr) + "/hook"} {
			if w, err := c.CreateWebhook(ctx, cove.WebhookChange{URL: &url}); err == nil {
				t.Errorf("a webhook to %s was taken: %+v", url, w)
			} else if !errors.Is(err, cove.ErrInvalidArgument) {
				t.Errorf("a webhook to %s: %v, want a 400", url, err)
			}
		}
		byName, reflecting := hostOnlyURL("localhost")+"/hook", fmt.Sprintf("http://%s:5009/hook", registryAddr)
		hooks := map[string]string{}
		for _, url := range []string{byName, reflecting} {
			w, err := c.CreateWebhook(ctx, cove.WebhookChange{URL: &url})
			if err != nil {
				t.Fatalf("a webhook to %s: %v", url, err)
			}
			hooks[url] = w.ID
		}
		sb, err := c.Create(ctx, cove.CreateOptions{Template: "base"})
		if err != nil {
			t.Fatal(err)
		}
		sb.Kill(ctx)
		for url, want := range map[string]string{byName: "is loopback", reflecting: "the receiver answered 500 Internal Server Error"} {
			testkit.Eventually(t, time.Minute, func() error {
				ds, err := c.WebhookDeliveries(ctx, hooks[url])
				if err != nil {
					return err
				}
				for _, d := range ds {
					if strings.Contains(d.LastError, hostSecret) {
						t.Fatalf("a delivery to %s records the receiver's answer: %q", url, d.LastError)
					}
					if d.LastError != "" && !strings.Contains(d.LastError, want) {
						t.Fatalf("a delivery to %s: lastError %q, want %q", url, d.LastError, want)
					}
					if d.LastError != "" {
						return nil
					}
				}
				return fmt.Errorf("no failed delivery to %s yet: %+v", url, ds)
			})
		}
	})
	if n := svc.hits.Load(); n != 0 {
		t.Errorf("the host-only service was reached %d times", n)
	}
}

// registryNetwork makes the test's network namespace, joined to the host
// by a veth whose host end holds hostOnlyAddr and routes registryNet there.
func registryNetwork(t *testing.T) netns.NsHandle {
	t.Helper()
	ns, err := hostproc.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	name := fmt.Sprintf("tadr%d", os.Getpid()%100000)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p", PeerNamespace: netlink.NsFd(ns)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	addr := func(s string) *netlink.Addr {
		a, err := netlink.ParseAddr(s)
		step(err)
		return a
	}
	host, err := netlink.LinkByName(name)
	step(err)
	step(netlink.AddrAdd(host, addr(hostOnlyAddr+"/32")))
	step(netlink.LinkSetUp(host))
	step(netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Dst: addr(registryNet).IPNet, Scope: netlink.SCOPE_LINK}))
	h, err := netlink.NewHandleAt(ns)
	step(err)
	defer h.Close()
	inner, err := h.LinkByName(name + "p")
	step(err)
	lo, err := h.LinkByName("lo")
	step(err)
	step(h.AddrAdd(inner, addr(registryAddr+"/30")))
	step(h.LinkSetUp(inner))
	step(h.LinkSetUp(lo))
	step(h.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Dst: addr(hostOnlyAddr + "/32").IPNet, Scope: netlink.SCOPE_LINK}))
	return ns
}

// serveHostOnly starts the host-only service on one port of loopback and
// of hostOnlyAddr. It refuses every request, saying what it holds.
func serveHostOnly(t *testing.T) *hostOnly {
	t.Helper()
	s := &hostOnly{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"user":"admin","password_hash":%q}`, hostSecret)
	})
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = lo.Addr().(*net.TCPAddr).Port
	own, err := net.Listen("tcp", fmt.Sprintf("%s:%d", hostOnlyAddr, s.port))
	if err != nil {
		lo.Close()
		t.Fatal(err)
	}
	for _, ln := range []net.Listener{lo, own} {
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	return s
}

// serveIn serves h on registryAddr:port in ns until the test ends.
func serveIn(t *testing.T, ns netns.NsHandle, port int, h http.Handler) {
	t.Helper()
	ln, err := testutil.ListenIn(ns, fmt.Sprintf("%s:%d", registryAddr, port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// push writes a small random image to ref.
func push(t *testing.T, ref string) {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// getStatus is a build's status as the API answers it, log included.
func getStatus(t *testing.T, srv testutil.Server, b cove.BuiltTemplate) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/templates/"+b.TemplateID+"/builds/"+b.BuildID+"/status?logsOffset=0", nil)
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
