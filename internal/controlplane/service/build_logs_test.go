package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/template"
)

// deletedLogs records which builds' logs were deleted; it holds none.
type deletedLogs struct {
	mu  sync.Mutex
	ids []string
}

func (d *deletedLogs) BuildLog(context.Context, string, template.LogPage) ([]template.LogEntry, error) {
	return nil, nil
}

func (d *deletedLogs) BuildLogBytes(context.Context, []string) (int64, error) { return 0, nil }

func (d *deletedLogs) DeleteBuildLogs(_ context.Context, ids []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, ids...)
	return nil
}

// noBuilds is a builder that runs nothing: the test starts no build.
type noBuilds struct{}

func (noBuilds) Run(context.Context, string, string, template.Spec, func(template.LogEntry)) error {
	return errors.New("no builds here")
}

func (noBuilds) CanBuild(template.Spec) error { return nil }

// TestDroppedBuildsLoseTheirLogs: a template keeps its newest failed
// builds only; the logs of those a new build pushes out go from the
// database with them (else they would stay, charged to no one, for a
// week), and the kept ones' logs stay.
func TestDroppedBuildsLoseTheirLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := template.NewStore(t.TempDir(), logx.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ts := NewTemplates(ctx, st, noBuilds{}, nil, []byte("secret"), logx.Discard())
	logs := &deletedLogs{}
	ts.UseSharedLogs(logs)
	var made []string
	for range 25 {
		rec, b, err := ts.NewBuild(ctx, "a", "app", nil, BuildSize{}, "")
		if err != nil {
			t.Fatal(err)
		}
		b.Status = template.StatusError
		if err := st.SetBuild(rec.ID, *b); err != nil {
			t.Fatal(err)
		}
		made = append(made, b.ID)
	}
	rec, err := st.Get("a", "app")
	if err != nil {
		t.Fatal(err)
	}
	kept := buildIDs(rec)
	for _, id := range made {
		gone := slices.Contains(logs.ids, id)
		if gone == slices.Contains(kept, id) {
			t.Errorf("build %s: kept %v, its log deleted %v", id, !gone, gone)
		}
	}
	if len(kept) == len(made) {
		t.Fatalf("all %d builds kept: the test needs some pushed out", len(made))
	}
}
