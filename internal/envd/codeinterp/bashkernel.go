package codeinterp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// bashKernel runs cells in one bash process, so variables, functions and
// the directory carry over. Each cell is a file the shell sources; after
// it the shell writes a marker with its status to the standard output and
// error it had at the start (a cell that redirects its own output keeps
// the markers apart), which ends the cell's output.
type bashKernel struct {
	router
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dir   string // cell files
	token []byte // the marker, random per kernel

	mu2   sync.Mutex
	count int
	cell  int
	marks map[string]int // markers seen per run

	closeOnce sync.Once
}

func startBashKernel(ctx context.Context, dir string, env []string) (*bashKernel, error) {
	cells, err := os.MkdirTemp("", "cove-bash-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, stderr, err := outputPipes()
	if err != nil {
		os.RemoveAll(cells)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
	stdin, err := cmd.StdinPipe() // closed by Start if it fails
	if err == nil {
		err = cmd.Start()
	}
	stdout.w.Close()
	stderr.w.Close()
	if err != nil {
		stdout.r.Close()
		stderr.r.Close()
		os.RemoveAll(cells)
		return nil, fmt.Errorf("start bash: %w", err)
	}
	k := &bashKernel{router: newRouter(), cmd: cmd, stdin: stdin, dir: cells, token: []byte("__cove_end_" + newID()), marks: map[string]int{}}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); k.scan(stdout.r, "stdout") }()
	go func() { defer readers.Done(); k.scan(stderr.r, "stderr") }()
	go func() {
		_ = cmd.Wait()
		readers.Wait()
		close(k.done)
	}()
	go k.dispatch()
	// The markers' descriptors, and interrupts that stop the running
	// command, not the shell.
	if _, err := fmt.Fprintf(stdin, "exec 8>&1 9>&2\ntrap : INT\n"); err != nil {
		k.close()
		return nil, err
	}
	if err := runSilent(k, "true", runOpts{}); err != nil {
		k.close()
		return nil, fmt.Errorf("bash: %w", err)
	}
	return k, nil
}

// scan passes output on as stream messages up to each marker, and counts
// the markers.
func (k *bashKernel) scan(r io.ReadCloser, name string) {
	defer r.Close()
	var buf []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.Index(buf, k.token)
			if i < 0 {
				// Keep what may be the start of a marker.
				keep := min(len(buf), len(k.token)+1)
				if err != nil {
					keep = 0
				}
				k.output(name, buf[:len(buf)-keep])
				buf = buf[len(buf)-keep:]
				break
			}
			end := bytes.IndexByte(buf[i:], '\n')
			if end < 0 {
				break // the marker's line is not complete yet
			}
			k.output(name, bytes.TrimSuffix(buf[:i], []byte("\n")))
			k.mark(string(bytes.TrimSpace(buf[i+len(k.token) : i+end])))
			buf = buf[i+end+1:]
		}
		if err != nil {
			return
		}
	}
}

func (k *bashKernel) output(name string, b []byte) {
	if len(b) == 0 {
		return
	}
	k.mu.Lock()
	a := k.active
	k.mu.Unlock()
	if a == nil {
		return
	}
	c, _ := json.Marshal(map[string]string{"name": name, "text": string(b)})
	k.in <- message{Header: header{MsgType: "stream"}, Parent: header{MsgID: a.id}, Content: c}
}

// mark counts a marker ("<run> [status]"); with both, the run is over.
func (k *bashKernel) mark(s string) {
	id, _, _ := bytes.Cut([]byte(s), []byte(" "))
	k.mu2.Lock()
	k.marks[string(id)]++
	both := k.marks[string(id)] == 2
	if both {
		delete(k.marks, string(id))
	}
	count := k.count
	k.mu2.Unlock()
	if !both {
		return
	}
	reply, _ := json.Marshal(map[string]any{"status": "ok", "execution_count": count})
	idle, _ := json.Marshal(map[string]string{"execution_state": "idle"})
	k.in <- message{Header: header{MsgType: "execute_reply"}, Parent: header{MsgID: string(id)}, Content: reply}
	k.in <- message{Header: header{MsgType: "status"}, Parent: header{MsgID: string(id)}, Content: idle}
}

func (k *bashKernel) start(code string, opts runOpts) (*run, error) {
	select {
	case <-k.done:
		return nil, errKernelDied
	default:
	}
	k.mu2.Lock()
	k.cell++
	if !opts.silent {
		k.count++
	}
	file := filepath.Join(k.dir, "cell-"+strconv.Itoa(k.cell)+".sh")
	k.mu2.Unlock()
	if err := os.WriteFile(file, []byte(code), 0o600); err != nil {
		return nil, err
	}
	r := newRun(newID())
	k.setActive(r)
	cmd := fmt.Sprintf(". %s\nprintf '\\n%s %s %%d\\n' \"$?\" >&8\nprintf '\\n%s %s\\n' >&9\nrm -f %s\n",
		shellQuote(file), k.token, r.id, k.token, r.id, shellQuote(file))
	if _, err := io.WriteString(k.stdin, cmd); err != nil {
		k.setActive(nil)
		return nil, fmt.Errorf("send a cell to bash: %w", err)
	}
	return r, nil
}

func (k *bashKernel) setEnv(set map[string]string, unset []string) error {
	for name := range set {
		if !validEnvName(name) {
			return fmt.Errorf("%q is not a valid environment variable name", name)
		}
	}
	return runSilent(k, envCode("bash", set, unset), runOpts{})
}

func (k *bashKernel) interrupt() error { return syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT) }

func (k *bashKernel) exited() <-chan struct{} { return k.done }

func (k *bashKernel) close() error {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
	k.closeOnce.Do(func() {
		k.stdin.Close()
		os.RemoveAll(k.dir)
	})
	return nil
}
