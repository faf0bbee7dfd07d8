package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// runningNode reports every sandbox it is asked about running (what the
// list asks its node); the rest of service.Node is not called.
type runningNode struct{ service.Node }

func (runningNode) Get(_ context.Context, id string) (sandboxes.Info, error) {
	return sandboxes.Info{ID: id, State: sandboxes.StateRunning}, nil
}

// BenchmarkListSandboxes1000 is the dashboard's list of 1000 sandboxes
// as the server answers it: ten pages of 100 from SQLite, each checked
// with the node and written as JSON.
func BenchmarkListSandboxes1000(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cove.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now()
	for i := range 1000 {
		sb := store.Sandbox{ID: fmt.Sprintf("i%019d", i), Team: "t", TemplateID: "base", State: "running", StartedAt: t0.Add(time.Duration(i) * time.Millisecond),
			EndAt: t0.Add(time.Hour), CPUCount: 2, MemoryMB: 512, DiskMB: 384, Metadata: map[string]string{"owner": fmt.Sprint(i % 13)}, Isolation: "namespaces"}
		if err := st.InsertSandbox(ctx, sb); err != nil {
			b.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	a := New(service.New(service.Config{}, st, runningNode{}, []byte("s"), log), nil, nil, nil, st, log)
	b.ResetTimer()
	for b.Loop() {
		next, n := "", 0
		for {
			w := httptest.NewRecorder()
			a.ServeAs("t", w, httptest.NewRequest(http.MethodGet, "/v2/sandboxes?limit=100&state=running,paused&nextToken="+next, nil))
			if w.Code != 200 {
				b.Fatalf("list: %d %s", w.Code, w.Body)
			}
			n++
			if next = w.Header().Get("X-Next-Token"); next == "" {
				break
			}
		}
		if n != 10 {
			b.Fatalf("%d pages", n)
		}
	}
}
