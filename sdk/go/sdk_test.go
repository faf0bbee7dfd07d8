package cove_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

const testKey = "e2b_00000000000000000000000000000000005d6b00"

// server starts ../../bin/cove server (built by make build) for the test.
func server(t *testing.T) *cove.Client {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cove server needs root")
	}
	bin, _ := filepath.Abs("../../bin/cove")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make build", bin)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "server", "--listen", addr, "--data-dir", t.TempDir(), "--api-key", testKey,
		"--cgroup-parent", fmt.Sprintf("cove-sdk-test-%d", os.Getpid()), "--network=false", "--prepare-templates=false")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			client, err := cove.NewClient(cove.WithAPIURL("http://"+addr), cove.WithAPIKey(testKey))
			if err != nil {
				t.Fatal(err)
			}
			return client
		}
	}
	t.Fatal("server did not start")
	return nil
}

func TestSDK(t *testing.T) {
	client := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx, err := client.Create(ctx, cove.CreateOptions{Timeout: time.Minute, Metadata: map[string]string{"sdk": "go"}, Envs: map[string]string{"FROM_CREATE": "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())

	t.Run("commands", func(t *testing.T) {
		var streamed strings.Builder
		res, err := sbx.Commands.Run(ctx, "echo $FROM_CREATE $X; pwd; whoami", cove.WithEnvs(map[string]string{"X": "1"}),
			cove.WithCwd("/tmp"), cove.WithUser("root"), cove.OnStdout(func(b []byte) { streamed.Write(b) }))
		if err != nil || res.Stdout != "yes 1\n/tmp\nroot\n" || streamed.String() != res.Stdout {
			t.Errorf("run: %+v %v (streamed %q)", res, err, streamed.String())
		}
		_, err = sbx.Commands.Run(ctx, "echo no >&2; exit 4")
		var exitErr *cove.CommandExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode != 4 || exitErr.Stderr != "no\n" {
			t.Errorf("failing command: %v", err)
		}
		h, err := sbx.Commands.Start(ctx, "read x; echo got $x", cove.WithStdin())
		if err != nil {
			t.Fatal(err)
		}
		if err := h.SendStdin(ctx, []byte("hi\n")); err != nil {
			t.Fatal(err)
		}
		if res, err := h.Wait(ctx); err != nil || res.Stdout != "got hi\n" {
			t.Errorf("stdin: %+v %v", res, err)
		}
		bg, err := sbx.Commands.Start(ctx, "sleep 60")
		if err != nil {
			t.Fatal(err)
		}
		if err := bg.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := bg.Wait(ctx); !errors.As(err, &exitErr) {
			t.Errorf("killed command: %v", err)
		}
		if err := sbx.Commands.Kill(ctx, 999999); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("kill of an unknown pid: %v", err)
		}
		if _, err := sbx.Commands.Run(ctx, "sleep 30", cove.WithTimeout(300*time.Millisecond)); !errors.Is(err, cove.ErrTimeout) {
			t.Errorf("timed-out command: %v", err)
		}
	})

	t.Run("files", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		if _, err := sbx.Files.Write(ctx, "/home/user/d/big.bin", bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		r, err := sbx.Files.Read(ctx, "/home/user/d/big.bin")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, big) {
			t.Errorf("read back %d bytes, wrote %d", len(got), len(big))
		}
		st, err := sbx.Files.Stat(ctx, "/home/user/d/big.bin")
		if err != nil || st.Size != int64(len(big)) || st.Type != "file" || st.Owner != "user" {
			t.Errorf("stat %+v %v", st, err)
		}
		if created, err := sbx.Files.MakeDir(ctx, "/home/user/d/sub"); !created || err != nil {
			t.Errorf("make dir: %v %v", created, err)
		}
		if created, err := sbx.Files.MakeDir(ctx, "/home/user/d/sub"); created || err != nil {
			t.Errorf("make existing dir: %v %v", created, err)
		}
		if _, err := sbx.Files.Rename(ctx, "/home/user/d/big.bin", "/home/user/d/sub/moved.bin"); err != nil {
			t.Fatal(err)
		}
		list, err := sbx.Files.List(ctx, "/home/user/d", 2)
		if err != nil || len(list) != 2 {
			t.Errorf("list: %+v %v", list, err)
		}
		if err := sbx.Files.Remove(ctx, "/home/user/d"); err != nil {
			t.Fatal(err)
		}
		if ok, err := sbx.Files.Exists(ctx, "/home/user/d"); ok || err != nil {
			t.Errorf("exists after remove: %v %v", ok, err)
		}
		if _, err := sbx.Files.ReadFile(ctx, "/home/user/missing"); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("read missing: %v", err)
		}
		w, err := sbx.Files.Watch(ctx, "/home/user", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := sbx.Files.WriteFile(ctx, "/home/user/watched.txt", []byte("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.Events:
			if ev.Name != "watched.txt" {
				t.Errorf("event %+v", ev)
			}
		case <-time.After(10 * time.Second):
			t.Error("no watch event")
		}
		if err := w.Close(); err != nil {
			t.Errorf("close watcher: %v", err)
		}
	})

	t.Run("pty", func(t *testing.T) {
		term, err := sbx.PTY.Create(ctx, cove.PTYOptions{Cols: 80, Rows: 24})
		if err != nil {
			t.Fatal(err)
		}
		if err := term.Resize(ctx, 120, 40); err != nil {
			t.Fatal(err)
		}
		if _, err := term.Write([]byte("stty size; exit 3\n")); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(term)
		if !strings.Contains(string(out), "40 120") {
			t.Errorf("terminal output %q", out)
		}
		var exitErr *cove.CommandExitError
		if _, err := term.Wait(ctx); !errors.As(err, &exitErr) || exitErr.ExitCode != 3 {
			t.Errorf("terminal end: %v", err)
		}
	})

	t.Run("pause, snapshots and fork", func(t *testing.T) {
		if _, err := sbx.Files.Write(ctx, "/home/user/saved.txt", strings.NewReader("saved")); err != nil {
			t.Fatal(err)
		}
		if err := sbx.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sbx.Pause(ctx); !errors.Is(err, cove.ErrConflict) {
			t.Errorf("second pause: %v", err)
		}
		if _, err := client.Resume(ctx, sbx.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		// Paused with its memory, back over its files alone.
		if _, err := sbx.Commands.Start(ctx, "sleep 1000"); err != nil {
			t.Fatal(err)
		}
		if err := sbx.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Reboot(ctx, sbx.ID, time.Minute); err != nil {
			t.Fatal(err)
		}
		if r, err := sbx.Commands.Run(ctx, "cat /home/user/saved.txt; pgrep -x sleep || echo none"); err != nil || r.Stdout != "savednone\n" {
			t.Errorf("after the reboot: %+v %v", r, err)
		}
		snap, err := sbx.Snapshot(ctx, "go-sdk-snap")
		if err != nil || snap.ID != "go-sdk-snap:default" {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		if list, err := client.ListSnapshots(ctx, cove.SnapshotFilter{SandboxID: sbx.ID}); err != nil || len(list) != 1 || list[0].ID != snap.ID {
			t.Errorf("list snapshots %+v %v", list, err)
		}
		files, err := sbx.SnapshotWithoutMemory(ctx, "go-sdk-files")
		if err != nil || files.ID != "go-sdk-files:default" {
			t.Fatalf("snapshot without memory %+v %v", files, err)
		}
		fromFiles, err := client.Create(ctx, cove.CreateOptions{Template: files.ID, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer fromFiles.Kill(context.Background())
		defer client.DeleteSnapshot(context.Background(), files.ID)
		from, err := client.Create(ctx, cove.CreateOptions{Template: snap.ID, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer from.Kill(context.Background())
		kids, err := sbx.Fork(ctx, 2, time.Minute)
		if err != nil || len(kids) != 2 {
			t.Fatalf("fork %v %v", kids, err)
		}
		for _, s := range append(kids, from, fromFiles) {
			defer s.Kill(context.Background())
			r, err := s.Files.Read(ctx, "/home/user/saved.txt")
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if string(got) != "saved" {
				t.Errorf("%s: %q", s.ID, got)
			}
		}
		if err := client.DeleteSnapshot(ctx, snap.ID); err != nil {
			t.Error(err)
		}
		if err := client.DeleteSnapshot(ctx, snap.ID); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("second delete: %v", err)
		}
	})

	t.Run("pause at the timeout", func(t *testing.T) {
		for _, c := range []struct {
			on   cove.OnTimeout
			kept string // the file written before, and whether its process lives on
		}{{cove.OnTimeoutPause, "kept 1"}, {cove.OnTimeoutPauseFiles, "kept 0"}} {
			s, err := client.Create(ctx, cove.CreateOptions{Timeout: time.Minute, OnTimeout: c.on})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Kill(context.Background())
			if _, err := s.Commands.Run(ctx, "echo kept > /home/user/f; setsid sleep 600 >/dev/null 2>&1 &"); err != nil {
				t.Fatal(err)
			}
			if err := s.SetTimeout(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				info, err := s.Info(ctx)
				if err == nil && info.State == "paused" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("on timeout %d: still %+v (%v) 30 s after a timeout of 1 s", c.on, info, err)
				}
			}
			back, err := client.Connect(ctx, s.ID, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			res, err := back.Commands.Run(ctx, "echo $(cat /home/user/f) $(pgrep -cx sleep)")
			if err != nil || strings.TrimSpace(res.Stdout) != c.kept {
				t.Errorf("on timeout %d, resumed: %q %v, want %q", c.on, res.Stdout, err, c.kept)
			}
		}
	})

	t.Run("volumes", func(t *testing.T) {
		vol, err := client.CreateVolume(ctx, "go-sdk-vol")
		if err != nil {
			t.Fatal(err)
		}
		defer client.DeleteVolume(context.Background(), vol.ID)
		if err := vol.WriteFile(ctx, "/in.txt", strings.NewReader("from go"), false); err != nil {
			t.Fatal(err)
		}
		s, err := client.Create(ctx, cove.CreateOptions{Timeout: time.Minute, Volumes: map[string]string{"/data": "go-sdk-vol"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Kill(context.Background())
		if res, err := s.Commands.Run(ctx, "cat /data/in.txt; echo back > /data/out.txt"); err != nil || res.Stdout != "from go" {
			t.Errorf("in the sandbox: %+v %v", res, err)
		}
		r, err := vol.ReadFile(ctx, "/out.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if string(got) != "back\n" {
			t.Errorf("read back %q", got)
		}
		if list, err := client.ListVolumes(ctx); err != nil || len(list) != 1 || list[0].Name != "go-sdk-vol" {
			t.Errorf("list %+v %v", list, err)
		}
		if err := client.DeleteVolume(ctx, "go-sdk-vol"); err != nil {
			t.Error(err)
		}
		if _, err := client.GetVolume(ctx, vol.ID); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("after the delete: %v", err)
		}
	})

	t.Run("sandboxes", func(t *testing.T) {
		info, err := sbx.Info(ctx)
		if err != nil || info.ID != sbx.ID || info.Metadata["sdk"] != "go" || info.State != "running" {
			t.Errorf("info %+v %v", info, err)
		}
		list, err := client.List(ctx, cove.ListOptions{Metadata: map[string]string{"sdk": "go"}})
		if err != nil || len(list) != 1 || list[0].ID != sbx.ID {
			t.Errorf("list %+v %v", list, err)
		}
		if err := sbx.SetTimeout(ctx, 2*time.Minute); err != nil {
			t.Error(err)
		}
		if m, err := sbx.Metrics(ctx); err != nil || len(m) == 0 || m[0].MemTotal == 0 {
			t.Errorf("metrics %+v %v", m, err)
		}
		if m, err := sbx.MetricsBetween(ctx, info.StartedAt.Add(-time.Hour), info.StartedAt.Add(-time.Minute)); err != nil || len(m) != 0 {
			t.Errorf("metrics before the sandbox: %+v %v", m, err)
		}
		if list, err := client.List(ctx, cove.ListOptions{Template: "base", StartedAfter: info.StartedAt}); err != nil || len(list) == 0 || list[0].Name != "base" || list[0].Isolation == "" {
			t.Errorf("list by template and start %+v %v", list, err)
		}
		again, err := client.Connect(ctx, sbx.ID, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := again.Commands.Run(ctx, "echo connected"); err != nil || res.Stdout != "connected\n" {
			t.Errorf("through Connect: %+v %v", res, err)
		}
		// An idempotency key: sent twice, one sandbox.
		keyed := cove.CreateOptions{Metadata: map[string]string{"sdk": "go-keyed"}, IdempotencyKey: "go-sdk-key"}
		k1, err := client.Create(ctx, keyed)
		if err != nil {
			t.Fatal(err)
		}
		defer k1.Kill(context.Background())
		if k2, err := client.Create(ctx, keyed); err != nil || k2.ID != k1.ID {
			t.Errorf("a keyed create again: %v %v, want %s", k2, err, k1.ID)
		}
		if _, err := client.Create(ctx, cove.CreateOptions{IdempotencyKey: "go-sdk-key"}); !errors.Is(err, cove.ErrConflict) {
			t.Errorf("the key for another create: %v, want a conflict", err)
		}
		bad, _ := cove.NewClient(cove.WithAPIURL(client.APIURL()), cove.WithAPIKey("e2b_"+strings.Repeat("1", 40)))
		if _, err := bad.Create(ctx, cove.CreateOptions{}); !errors.Is(err, cove.ErrUnauthorized) {
			t.Errorf("wrong key: %v", err)
		}
		if err := sbx.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sbx.Kill(ctx); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("second kill: %v", err)
		}
	})
}
