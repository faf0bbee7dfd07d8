package cove_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// TestCodeInterpreter runs code through Sandbox.Code in a sandbox of a
// template over base that starts the code interpreter, as
// code-interpreter-v1 does.
func TestCodeInterpreter(t *testing.T) {
	client := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := client.BuildTemplate(ctx, cove.TemplateBuild{
		Name:     "go-code-interpreter",
		StartCmd: "sudo /.cove/cove-envd code-interpreter",
		ReadyCmd: "/.cove/cove-envd code-interpreter --ready",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sbx, err := client.Create(ctx, cove.CreateOptions{Template: "go-code-interpreter", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Kill(context.Background())

	t.Run("state, output and callbacks", func(t *testing.T) {
		if _, err := sbx.Code.RunCode(ctx, "n = 20", cove.RunCodeOptions{}); err != nil {
			t.Fatal(err)
		}
		var streamed []string
		exec, err := sbx.Code.RunCode(ctx, "print('half', n)\nn * 2", cove.RunCodeOptions{
			OnStdout: func(m cove.OutputMessage) { streamed = append(streamed, m.Line) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if exec.Text() != "40" || strings.Join(exec.Logs.Stdout, "") != "half 20\n" || strings.Join(streamed, "") != "half 20\n" || exec.ExecutionCount < 2 {
			t.Errorf("execution: %+v, streamed %q", exec, streamed)
		}
	})
	t.Run("an exception", func(t *testing.T) {
		exec, err := sbx.Code.RunCode(ctx, "{}['missing']", cove.RunCodeOptions{})
		if err != nil || exec.Error == nil || exec.Error.Name != "KeyError" {
			t.Errorf("%+v %v", exec, err)
		}
	})
	t.Run("a chart", func(t *testing.T) {
		exec, err := sbx.Code.RunCode(ctx, "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 2])\nplt.title('bars')", cove.RunCodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var chart *cove.Chart
		for _, r := range exec.Results {
			if r.Chart != nil {
				chart = r.Chart
				if png, err := base64.StdEncoding.DecodeString(r.PNG); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
					t.Errorf("png: %v", err)
				}
			}
		}
		if chart == nil || chart.Type != "bar" || chart.Title != "bars" || len(chart.Elements) != 2 || chart.Elements[1].Label != "b" || chart.Elements[1].Value != float64(2) {
			t.Errorf("chart: %+v", chart)
		}
	})
	t.Run("contexts and languages", func(t *testing.T) {
		c, err := sbx.Code.CreateContext(ctx, cove.CodeContextOptions{Language: "js", Cwd: "/tmp"})
		if err != nil {
			t.Fatal(err)
		}
		exec, err := sbx.Code.RunCode(ctx, "process.cwd()", cove.RunCodeOptions{Context: c})
		if err != nil || exec.Text() != "/tmp" || c.Language != "javascript" {
			t.Errorf("%+v %+v %v", c, exec, err)
		}
		list, err := sbx.Code.ListContexts(ctx)
		if err != nil || len(list) != 3 || list[2].ID != c.ID {
			t.Errorf("list: %+v %v", list, err)
		}
		if err := sbx.Code.RemoveContext(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := sbx.Code.RunCode(ctx, "1", cove.RunCodeOptions{Context: c}); !errors.Is(err, cove.ErrNotFound) {
			t.Errorf("a removed context: %v", err)
		}
		if _, err := sbx.Code.RunCode(ctx, "1", cove.RunCodeOptions{Language: "cobol"}); !errors.Is(err, cove.ErrInvalidArgument) {
			t.Errorf("an unknown language: %v", err)
		}
	})
	t.Run("a deadline interrupts the code", func(t *testing.T) {
		short, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		if _, err := sbx.Code.RunCode(short, "import time\ntime.sleep(60)", cove.RunCodeOptions{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("past the deadline: %v", err)
		}
		exec, err := sbx.Code.RunCode(ctx, "n", cove.RunCodeOptions{})
		if err != nil || exec.Text() != "20" {
			t.Errorf("after the interrupt: %+v %v", exec, err)
		}
	})
	t.Run("the server comes back when it is killed", func(t *testing.T) {
		// SIGKILL: the server cannot end its kernels itself. It runs as
		// root (through sudo), so root kills it.
		if _, err := sbx.Commands.Run(ctx, "pkill -KILL -f 'code-interpreter --serve'", cove.WithUser("root")); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			exec, err := sbx.Code.RunCode(ctx, "1 + 1", cove.RunCodeOptions{})
			if err == nil && exec.Text() == "2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not back after 30 s: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// The killed server's kernels went with it (parent-death signal):
		// one IPython kernel left, the new server's.
		res, err := sbx.Commands.Run(ctx, "pgrep -fc ipykernel_launcher")
		if err != nil || strings.TrimSpace(res.Stdout) != "1" {
			t.Errorf("IPython kernels after the restart: %v %+v", err, res)
		}
	})
	t.Run("a killed sandbox breaks the stream off", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := sbx.Code.RunCode(ctx, "print('started', flush=True)\nimport time\ntime.sleep(60)", cove.RunCodeOptions{
				OnStdout: func(cove.OutputMessage) {
					go sbx.Kill(context.Background())
				},
			})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Error("the execution ended cleanly in a killed sandbox")
			}
		case <-time.After(30 * time.Second):
			t.Error("the stream did not end within 30 s of the kill")
		}
	})
}
