package codeinterp

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// serveFlag makes the supervisor's child the server itself.
const serveFlag = "--serve"

// Main runs the code interpreter as a template's start command does: a
// supervisor that starts the server (the same binary, with serveFlag) and
// starts it again within seconds whenever it exits. args are the
// command's arguments (after "code-interpreter").
func Main(args []string) int {
	fs := flag.NewFlagSet("code-interpreter", flag.ContinueOnError)
	addr := fs.String("listen", ":"+strconv.Itoa(Port), "address to listen on")
	agent := fs.String("agent", "http://127.0.0.1:49983", "the sandbox agent's URL")
	serve := fs.Bool(serveFlag[2:], false, "be the server (the supervisor starts it so)")
	ready := fs.Bool("ready", false, "exit 0 if the server answers on its port, 1 if not")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *ready {
		return checkReady(*addr)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "code-interpreter")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *serve {
		if err := serve1(ctx, *addr, *agent, log); err != nil {
			log.Error("code interpreter", "err", err)
			return 1
		}
		return 0
	}
	supervise(ctx, append([]string{"code-interpreter", serveFlag}, args...), log)
	return 0
}

// serve1 starts the default contexts, then listens: once the port
// answers, Python and JavaScript are ready.
func serve1(ctx context.Context, addr, agent string, log *slog.Logger) error {
	// The default contexts work where the server was started: the
	// template's directory (code-interpreter-v1's is /home/user, as on
	// E2B), under sudo too, whose HOME is root's.
	cwd, _ := os.Getwd()
	s, err := New(ctx, Config{Agent: agent, Cwd: cwd, Defaults: []string{"python", "javascript"}}, log)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// supervise runs the server (this binary with args) until ctx ends, again after each exit (after
// 0.5 s, doubling to 5 s while it keeps failing fast).
func supervise(ctx context.Context, args []string, log *slog.Logger) {
	wait := 500 * time.Millisecond
	for {
		cmd := exec.Command("/proc/self/exe", args...)
		cmd.Args[0] = os.Args[0]
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		began := time.Now()
		err := cmd.Start()
		if err == nil {
			stopped := make(chan struct{})
			go func() {
				select {
				case <-ctx.Done():
					_ = cmd.Process.Signal(syscall.SIGTERM)
				case <-stopped:
				}
			}()
			err = cmd.Wait()
			close(stopped)
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			wait = 500 * time.Millisecond
		}
		log.Warn("the code interpreter exited: starting it again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// checkReady is the template's ready command: 0 once /health answers.
func checkReady(addr string) int {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 2
	}
	if host == "" {
		host = "127.0.0.1"
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/health")
	if err != nil {
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
