package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/sqlite"
)

// BenchmarkCreatedLine is what a create writes of its life: its log
// line and its created event, with 1 KiB of metadata, in a team that
// already has 10 000 of each.
func BenchmarkCreatedLine(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "cove.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	md := map[string]string{}
	for k := range 8 {
		md[fmt.Sprintf("key%d", k)] = fmt.Sprintf("%0120d", k)
	}
	at := time.Unix(1700000000, 0)
	add := func(i int) {
		sb := store.Sandbox{ID: fmt.Sprintf("i%09d", i), Team: "t", TemplateID: "base", StartedAt: at, Metadata: md}
		e := store.NewEvent(sb, store.EventCreated, store.ReasonAPI, at.Add(time.Duration(i)*time.Millisecond))
		l := store.SandboxLog{SandboxID: sb.ID, Team: "t", Time: e.Time, Level: "info", Message: "sandbox created",
			Fields: map[string]string{"template": "base", "cpuCount": "2", "memoryMB": "512"}}
		if err := s.AddSandboxLog(ctx, l, e); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 10_000 {
		add(i)
	}
	b.ResetTimer()
	i := 10_000
	for b.Loop() {
		add(i)
		i++
	}
}
