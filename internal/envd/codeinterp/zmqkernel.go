package codeinterp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
)

// kernelSpec is a Jupyter kernel's kernel.json.
type kernelSpec struct {
	Argv          []string `json:"argv"`
	InterruptMode string   `json:"interrupt_mode"`
}

// kernelSpecDirs are where Jupyter kernels are installed.
var kernelSpecDirs = []string{"/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels"}

// findKernelSpec reads the kernel spec named name.
func findKernelSpec(name string) (kernelSpec, error) {
	for _, dir := range kernelSpecDirs {
		b, err := os.ReadFile(filepath.Join(dir, name, "kernel.json"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return kernelSpec{}, err
		}
		var s kernelSpec
		if err := json.Unmarshal(b, &s); err != nil {
			return kernelSpec{}, fmt.Errorf("kernel spec %s: %w", name, err)
		}
		if len(s.Argv) == 0 {
			return kernelSpec{}, fmt.Errorf("kernel spec %s has no argv", name)
		}
		return s, nil
	}
	if s, ok := nativeSpecs[name]; ok {
		return s, nil
	}
	return kernelSpec{}, fmt.Errorf("no Jupyter kernel %q is installed (looked in %s)", name, strings.Join(kernelSpecDirs, ", "))
}

// nativeSpecs are the kernels that run without a spec, as Jupyter's own
// client has them: IPython's, wherever ipykernel is importable.
var nativeSpecs = map[string]kernelSpec{
	"python3": {Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}},
}

// connection is a kernel's connection file.
type connection struct {
	Transport       string `json:"transport"`
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

// zmqKernel is a Jupyter kernel process reached over ZeroMQ.
type zmqKernel struct {
	cmd     *exec.Cmd
	connDir string
	sign    signer
	session string
	spec    kernelSpec
	lang    string // the language of envCode

	shell, control, iopub zmq4.Socket
	cancel                context.CancelFunc

	router
	closeOnce sync.Once
}

// startZMQKernel starts the kernel spec names in dir with env, and returns
// once it answers on its shell channel and publishes on IOPub.
func startZMQKernel(ctx context.Context, name, lang, dir string, env []string) (*zmqKernel, error) {
	spec, err := findKernelSpec(name)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	conn := connection{Transport: "tcp", IP: "127.0.0.1", ShellPort: ports[0], IOPubPort: ports[1], StdinPort: ports[2],
		ControlPort: ports[3], HBPort: ports[4], Key: hex.EncodeToString(key), SignatureScheme: "hmac-sha256", KernelName: name}
	connDir, err := os.MkdirTemp("", "cove-kernel-")
	if err != nil {
		return nil, err
	}
	connFile := filepath.Join(connDir, "connection.json")
	b, _ := json.Marshal(conn)
	if err := os.WriteFile(connFile, b, 0o600); err != nil {
		os.RemoveAll(connDir)
		return nil, err
	}
	argv := make([]string, len(spec.Argv))
	for i, a := range spec.Argv {
		argv[i] = strings.ReplaceAll(a, "{connection_file}", connFile)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		os.RemoveAll(connDir)
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Dir: dir, Env: env, Stdout: os.Stderr, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(connDir)
		return nil, fmt.Errorf("start kernel %s: %w", name, err)
	}
	k := &zmqKernel{cmd: cmd, connDir: connDir, sign: signer{key: []byte(conn.Key)}, session: newID(), spec: spec, lang: lang,
		router: newRouter()}
	go k.wait()
	go k.dispatch()
	if err := k.connect(conn); err != nil {
		k.close()
		return nil, err
	}
	if err := k.handshake(ctx, func(m message) error { return k.send(k.shell, m) }); err != nil {
		k.close()
		return nil, fmt.Errorf("kernel %s: %w", name, err)
	}
	return k, nil
}

// freePorts returns n TCP ports free on the loopback address now.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (k *zmqKernel) wait() {
	_ = k.cmd.Wait()
	close(k.done)
}

func (k *zmqKernel) connect(c connection) error {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	opts := []zmq4.Option{zmq4.WithDialerRetry(20 * time.Millisecond), zmq4.WithDialerMaxRetries(1000)}
	k.shell = zmq4.NewDealer(ctx, append(opts, zmq4.WithID(zmq4.SocketIdentity(k.session)))...)
	k.control = zmq4.NewDealer(ctx, append(opts, zmq4.WithID(zmq4.SocketIdentity(k.session+"-control")))...)
	k.iopub = zmq4.NewSub(ctx, opts...)
	addr := func(port int) string { return fmt.Sprintf("tcp://%s:%d", c.IP, port) }
	for _, s := range []struct {
		sock zmq4.Socket
		port int
	}{{k.shell, c.ShellPort}, {k.control, c.ControlPort}, {k.iopub, c.IOPubPort}} {
		if err := dialWhileAlive(s.sock, addr(s.port), k.done); err != nil {
			return err
		}
	}
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("subscribe to the kernel's IOPub: %w", err)
	}
	go k.read(k.iopub)
	go k.read(k.shell)
	go k.read(k.control)
	return nil
}

// dialWhileAlive dials addr, retrying while the kernel has not bound it
// yet, and gives up once the kernel has exited.
func dialWhileAlive(s zmq4.Socket, addr string, done <-chan struct{}) error {
	for {
		err := s.Dial(addr)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("the kernel exited before it listened on %s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (k *zmqKernel) send(s zmq4.Socket, m message) error {
	frames, err := k.sign.frames(m)
	if err != nil {
		return err
	}
	if err := s.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		return fmt.Errorf("send %s to the kernel: %w", m.Header.MsgType, err)
	}
	return nil
}

// read passes on what the kernel sends on s.
func (k *zmqKernel) read(s zmq4.Socket) {
	for {
		zm, err := s.Recv()
		if err != nil {
			return // closed
		}
		m, err := k.sign.parse(zm.Frames)
		if err != nil {
			continue
		}
		select {
		case k.in <- m:
		case <-k.done:
			return
		}
	}
}

func (k *zmqKernel) start(code string, opts runOpts) (*run, error) {
	silent := opts.silent
	select {
	case <-k.done:
		return nil, errKernelDied
	default:
	}
	// stop_on_error false: the server runs one cell of a context at a
	// time already, and with it the kernel would abort the next request
	// that reaches it while it is still settling an error (an interrupted
	// cell's KeyboardInterrupt), answering it with no output at all.
	m, err := newMessage(k.session, "execute_request", map[string]any{
		"code": code, "silent": silent, "store_history": !silent, "user_expressions": map[string]any{},
		"allow_stdin": false, "stop_on_error": false,
	})
	if err != nil {
		return nil, err
	}
	r := newRun(m.Header.MsgID)
	k.setActive(r)
	if err := k.send(k.shell, m); err != nil {
		k.setActive(nil)
		return nil, err
	}
	return r, nil
}

func (k *zmqKernel) interrupt() error {
	if k.spec.InterruptMode == "message" {
		m, err := newMessage(k.session, "interrupt_request", struct{}{})
		if err != nil {
			return err
		}
		return k.send(k.control, m)
	}
	// The kernel's process group: what it started is interrupted too.
	return syscall.Kill(-k.cmd.Process.Pid, syscall.SIGINT)
}

func (k *zmqKernel) exited() <-chan struct{} { return k.done }

func (k *zmqKernel) close() error {
	_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
	<-k.done
	k.closeOnce.Do(k.release)
	return nil
}

// release closes the sockets and removes the connection file.
func (k *zmqKernel) release() {
	for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
		if s != nil {
			s.Close()
		}
	}
	if k.cancel != nil {
		k.cancel()
	}
	os.RemoveAll(k.connDir)
}

func (k *zmqKernel) setEnv(set map[string]string, unset []string) error {
	return runSilent(k, envCode(k.lang, set, unset), runOpts{})
}
