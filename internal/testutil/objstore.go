package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/objstore"
)

// WeedPath is where make test's deps step builds SeaweedFS's server (from
// the Go module proxy), unless COVE_WEED names another.
const WeedPath = "/var/cache/cove-test/weed"

// s3Server is a SeaweedFS server a test binary starts once, with its S3
// gateway on loopback and one identity, in a directory of its own; it
// goes with StopObjectStore (a TestMain calls it).
type s3Server struct {
	dir   string
	cmd   *exec.Cmd
	url   string
	creds objstore.Credentials
	err   error
}

var (
	s3Once sync.Once
	s3     s3Server
	s3Seq  atomic.Int32
)

// ObjectStore returns the URL of a new, empty bucket in the binary's S3
// server (started on first use) and the credentials it takes. A machine
// without the server fails the test: make test builds it.
func ObjectStore(t testing.TB) (string, objstore.Credentials) {
	t.Helper()
	s3Once.Do(func() { s3.err = s3.start() })
	if s3.err != nil {
		t.Fatalf("S3 server: %v", s3.err)
	}
	return fmt.Sprintf("%s/test-%d-%d", s3.url, os.Getpid(), s3Seq.Add(1)), s3.creds
}

// StopObjectStore stops the binary's S3 server, if it started one, and
// removes its directory.
func StopObjectStore() {
	if s3.cmd == nil {
		return
	}
	// Its data is the tests' only: no need to let it shut down cleanly.
	_ = syscall.Kill(-s3.cmd.Process.Pid, syscall.SIGKILL)
	_ = s3.cmd.Wait()
	_ = fsutil.RemoveTree(s3.dir)
}

func (s *s3Server) start() error {
	bin := os.Getenv("COVE_WEED")
	if bin == "" {
		bin = WeedPath
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no SeaweedFS server at %s (make deps builds it): %w", bin, err)
	}
	var err error
	if s.dir, err = os.MkdirTemp("", "cove-s3-"); err != nil {
		return err
	}
	s.creds = objstore.Credentials{AccessKey: "cove-test", SecretKey: "cove-test-secret-" + strconv.Itoa(os.Getpid())}
	conf, _ := json.Marshal(map[string]any{"identities": []map[string]any{{
		"name":        "cove",
		"credentials": []map[string]string{{"accessKey": s.creds.AccessKey, "secretKey": s.creds.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}})
	if err := os.WriteFile(filepath.Join(s.dir, "s3.json"), conf, 0o600); err != nil {
		return err
	}
	ports, err := freePorts(8)
	if err != nil {
		return err
	}
	s.url = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	log, err := os.Create(filepath.Join(s.dir, "weed.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd = exec.Command(bin, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+filepath.Join(s.dir, "data"),
		"-master.port="+strconv.Itoa(ports[1]), "-master.port.grpc="+strconv.Itoa(ports[2]),
		"-volume.port="+strconv.Itoa(ports[3]), "-volume.port.grpc="+strconv.Itoa(ports[4]),
		"-filer", "-filer.port="+strconv.Itoa(ports[5]), "-filer.port.grpc="+strconv.Itoa(ports[6]),
		"-s3", "-s3.port="+strconv.Itoa(ports[0]), "-s3.port.grpc="+strconv.Itoa(ports[7]),
		"-s3.config="+filepath.Join(s.dir, "s3.json"), "-s3.port.iceberg=0", "-s3.port.lance=0", "-iam=false", "-master.telemetry=false",
		"-volume.max=0", "-master.volumeSizeLimitMB=64")
	if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o700); err != nil {
		return err
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	// Ready once a bucket can be made (the gateway answers before the
	// filer and a volume are up).
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		probe, perr := objstore.Open(ctx, s.url+"/ready", s.creds)
		if perr == nil {
			if perr = probe.Put(ctx, "probe", http.NoBody, 0); perr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			out, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			return fmt.Errorf("not ready in 90 s (%v); its log ends:\n%s", perr, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
