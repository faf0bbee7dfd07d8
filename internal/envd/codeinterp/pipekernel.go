package codeinterp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// pipeKernel is one of Cove's own kernels (JavaScript, Java): a process
// that reads Jupyter requests as JSON lines on descriptor 3 and writes
// Jupyter messages as JSON lines on descriptor 4. What it writes to its
// standard output and error (a child process's output, say) is the running
// execution's stdout and stderr.
type pipeKernel struct {
	router
	cmd *exec.Cmd

	wmu  sync.Mutex
	reqs *os.File // descriptor 3's other end

	closeOnce sync.Once
}

// startPipeKernel starts argv in dir with env and waits until it answers.
func startPipeKernel(ctx context.Context, argv []string, dir string, env []string) (*pipeKernel, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	msgR, msgW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	stdout, stderr, err := outputPipes()
	if err != nil {
		reqR.Close()
		reqW.Close()
		msgR.Close()
		msgW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Dir: dir, Env: env, ExtraFiles: []*os.File{reqR, msgW},
		Stdout: stdout.w, Stderr: stderr.w, SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	err = cmd.Start()
	reqR.Close()
	msgW.Close()
	stdout.w.Close()
	stderr.w.Close()
	if err != nil {
		reqW.Close()
		msgR.Close()
		stdout.r.Close()
		stderr.r.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	k := &pipeKernel{router: newRouter(), cmd: cmd, reqs: reqW}
	var readers sync.WaitGroup
	readers.Add(3)
	go func() { defer readers.Done(); k.readMessages(msgR) }()
	go func() { defer readers.Done(); k.readOutput(stdout.r, "stdout") }()
	go func() { defer readers.Done(); k.readOutput(stderr.r, "stderr") }()
	go func() {
		_ = cmd.Wait()
		readers.Wait() // what it wrote before it died reaches its run
		close(k.done)
	}()
	go k.dispatch()
	if err := k.handshake(ctx, k.send); err != nil {
		k.close()
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	return k, nil
}

type outputPipe struct{ r, w *os.File }

// outputPipes are a kernel's standard output and error.
func outputPipes() (stdout, stderr outputPipe, err error) {
	if stdout.r, stdout.w, err = os.Pipe(); err != nil {
		return stdout, stderr, err
	}
	if stderr.r, stderr.w, err = os.Pipe(); err != nil {
		stdout.r.Close()
		stdout.w.Close()
	}
	return stdout, stderr, err
}

func (k *pipeKernel) readMessages(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		var m message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		k.in <- m
	}
}

// readOutput turns the process's raw output into stream messages of the
// running execution (dropped between executions).
func (k *pipeKernel) readOutput(r io.ReadCloser, name string) {
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			k.mu.Lock()
			a := k.active
			k.mu.Unlock()
			if a != nil {
				c, _ := json.Marshal(map[string]string{"name": name, "text": string(buf[:n])})
				k.in <- message{Header: header{MsgType: "stream"}, Parent: header{MsgID: a.id}, Content: c}
			}
		}
		if err != nil {
			return
		}
	}
}

func (k *pipeKernel) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	if _, err := k.reqs.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("send %s to the kernel: %w", m.Header.MsgType, err)
	}
	return nil
}

func (k *pipeKernel) start(code string, opts runOpts) (*run, error) {
	select {
	case <-k.done:
		return nil, errKernelDied
	default:
	}
	m, err := newMessage(newID(), "execute_request", map[string]any{
		"code": code, "silent": opts.silent, "store_history": !opts.silent, "typescript": opts.typescript,
	})
	if err != nil {
		return nil, err
	}
	r := newRun(m.Header.MsgID)
	k.setActive(r)
	if err := k.send(m); err != nil {
		k.setActive(nil)
		return nil, err
	}
	return r, nil
}

// setEnv sends Cove's own request: the kernel changes its environment.
func (k *pipeKernel) setEnv(set map[string]string, unset []string) error {
	if unset == nil {
		unset = []string{}
	}
	m, err := newMessage(newID(), "cove_env_request", map[string]any{"set": set, "unset": unset})
	if err != nil {
		return err
	}
	r := newRun(m.Header.MsgID)
	k.setActive(r)
	if err := k.send(m); err != nil {
		k.setActive(nil)
		return err
	}
	for range r.msgs {
	}
	return r.err
}

func (k *pipeKernel) interrupt() error { return syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT) }

func (k *pipeKernel) exited() <-chan struct{} { return k.done }

func (k *pipeKernel) close() error {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
	k.closeOnce.Do(func() { k.reqs.Close() })
	return nil
}
