package model_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/testutil"
	"github.com/covesandbox/cove/internal/testutil/testkit"
	cove "github.com/covesandbox/cove/sdk/go"
)

// TestSpillCutShort is the regression case of the bug the model test found
// on gVisor: a server killed while a paused sandbox's memory was being
// written to disk left runsc's checkpoint running; the restarted server
// adopted the sandbox as alive, the checkpoint then ended it, and the
// sandbox was lost with its image on disk. Now the restarted server waits
// for the checkpoint, and the sandbox resumes from its image, its process
// alive. The kill lands while the checkpoint runs in most attempts (the
// sandbox holds 50 MB to write); each attempt passes either way. A kill
// just after the checkpoint ended, before its sandbox did, found the
// sandbox alive and lost it at the pause that refused it: the node now
// waits for that sandbox to end and lists its image.
func TestSpillCutShort(t *testing.T) {
	testutil.NeedRunsc(t)
	runsc, _ := filepath.Abs(filepath.Join(filepath.Dir(testutil.Binary(t)), "runsc"))
	srv := testutil.StartProc(t, apiKey, "--default-isolation", "gvisor", "--runsc", runsc, "--pause-to-disk-after", "1s")
	c, err := cove.NewClient(cove.WithAPIURL(srv.URL), cove.WithSandboxURL(srv.URL), cove.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for attempt := range 3 {
		s, err := c.Create(ctx, cove.CreateOptions{Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commands.Run(ctx, "head -c 50000000 /dev/urandom > /dev/shm/big; setsid sleep 1000 >/dev/null 2>&1 &"); err != nil {
			t.Fatal(err)
		}
		if err := s.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		// The record says spilling before runsc's checkpoint starts.
		record := filepath.Join(srv.DataDir, "node", s.ID+".json")
		testkit.Eventually(t, time.Minute, func() error {
			b, _ := os.ReadFile(record)
			if !strings.Contains(string(b), `"memory"`) {
				return os.ErrNotExist
			}
			return nil
		})
		time.Sleep(time.Duration(50+50*attempt) * time.Millisecond)
		srv.Restart(true)
		time.Sleep(2 * time.Second) // a checkpoint left running ends it meanwhile
		if info, err := c.Info(ctx, s.ID); err != nil || info.State != "paused" {
			t.Fatalf("attempt %d: %+v (%v), want paused", attempt, info, err)
		}
		back, err := c.Connect(ctx, s.ID, time.Minute)
		if err != nil {
			t.Fatalf("attempt %d: resume: %v", attempt, err)
		}
		if res, err := back.Commands.Run(ctx, "pgrep -cx sleep"); err != nil || strings.TrimSpace(res.Stdout) != "1" {
			t.Errorf("attempt %d: its process after the resume: %q %v", attempt, res.Stdout, err)
		}
		if err := c.Kill(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	if left := srv.Leftovers(); len(left) > 0 {
		t.Errorf("left on the host: %v", left)
	}
}
