package envd_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd"
	"github.com/covesandbox/cove/internal/logx"
	fspb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
	"github.com/covesandbox/cove/sdk/go/envdpb/filesystem/filesystemconnect"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// agent is an in-process agent (not PID 1) for tests.
type agent struct {
	srv  *httptest.Server
	proc processconnect.ProcessClient
	fs   filesystemconnect.FilesystemClient
}

func newAgent(t *testing.T) *agent {
	t.Helper()
	srv := httptest.NewServer(envd.New(envd.Config{Fixed: map[string]string{"E2B_SANDBOX_ID": "itest"}}, logx.Discard()))
	t.Cleanup(srv.Close)
	return &agent{
		srv:  srv,
		proc: processconnect.NewProcessClient(srv.Client(), srv.URL),
		fs:   filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func req[T any](msg *T, headers ...string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header().Set(headers[i], headers[i+1])
	}
	return r
}

func basic(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

func (a *agent) post(t *testing.T, path, body string, headers ...string) *http.Response {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events collects a process stream until its end.
type events struct {
	start  uint32
	stdout strings.Builder
	stderr strings.Builder
	pty    strings.Builder
	end    *pb.ProcessEvent_EndEvent
	kinds  []string
}

type eventStream interface {
	Receive() bool
	Err() error
}

func collect(t *testing.T, s eventStream, msg func() *pb.ProcessEvent) events {
	t.Helper()
	var ev events
	for s.Receive() {
		e := msg()
		switch {
		case e.GetStart() != nil:
			ev.kinds = append(ev.kinds, "start")
			ev.start = e.GetStart().GetPid()
		case e.GetData() != nil:
			ev.kinds = append(ev.kinds, "data")
			ev.stdout.Write(e.GetData().GetStdout())
			ev.stderr.Write(e.GetData().GetStderr())
			ev.pty.Write(e.GetData().GetPty())
		case e.GetEnd() != nil:
			ev.kinds = append(ev.kinds, "end")
			ev.end = e.GetEnd()
		case e.GetKeepalive() != nil:
			ev.kinds = append(ev.kinds, "keepalive")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return ev
}

func (a *agent) start(t *testing.T, r *connect.Request[pb.StartRequest]) events {
	t.Helper()
	s, err := a.proc.Start(ctx(t), r)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, s, func() *pb.ProcessEvent { return s.Msg().GetEvent() })
}

func sh(cmd string) *pb.StartRequest {
	f := false
	return &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", cmd}}, Stdin: &f}
}

func code(err error) connect.Code { return connect.CodeOf(err) }

var _ = fspb.FileType_FILE_TYPE_FILE
