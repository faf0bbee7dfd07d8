package sudo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

const usage = `usage: sudo [-EHiknSs] [-u user] [VAR=value] [--] command [arg ...]
       sudo -i | -s
       sudo -v | -l | -V`

// Main is the sudo command: it parses sudo's usual options, has the agent
// run the command, and exits with its code.
func Main(args []string) int {
	req, code, done := parse(args)
	if done {
		return code
	}
	req.Env = os.Environ()
	req.Cwd, _ = os.Getwd()
	if term.IsTerminal(0) && term.IsTerminal(1) {
		cols, rows, err := term.GetSize(0)
		if err != nil {
			cols, rows = 80, 24
		}
		req.PTY = &Size{Cols: uint16(cols), Rows: uint16(rows)}
	}
	code, err := run(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sudo:", err)
		return 1
	}
	return code
}

// parse reads sudo's options; done means exit now with code.
func parse(args []string) (req Request, code int, done bool) {
	fail := func(msg string) (Request, int, bool) {
		fmt.Fprintf(os.Stderr, "sudo: %s\n%s\n", msg, usage)
		return Request{}, 1, true
	}
	i := 0
options:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break options
		case a == "-u" || a == "--user":
			if i+1 >= len(args) {
				return fail("option requires an argument -- 'u'")
			}
			i++
			req.User = args[i]
		case strings.HasPrefix(a, "--user="):
			req.User = strings.TrimPrefix(a, "--user=")
		case strings.HasPrefix(a, "--preserve-env"):
			req.KeepEnv = true
		case a == "--login":
			req.Login = true
		case a == "--shell":
			req.Shell = true
		case a == "--non-interactive", a == "--stdin", a == "--set-home", a == "--reset-timestamp", a == "--remove-timestamp":
		case a == "--validate":
			return Request{}, 0, true
		case a == "--list":
			fmt.Println("User may run the following commands in this sandbox:\n    (ALL : ALL) NOPASSWD: ALL")
			return Request{}, 0, true
		case a == "--version":
			fmt.Println("Sudo version 1 (Cove's, through the sandbox's agent)")
			return Request{}, 0, true
		case a == "--help":
			fmt.Println(usage)
			return Request{}, 0, true
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'E':
					req.KeepEnv = true
				case 'i':
					req.Login = true
				case 's':
					req.Shell = true
				case 'H', 'k', 'K', 'n', 'S', 'P':
				case 'v':
					return Request{}, 0, true
				case 'l':
					fmt.Println("User may run the following commands in this sandbox:\n    (ALL : ALL) NOPASSWD: ALL")
					return Request{}, 0, true
				case 'V':
					fmt.Println("Sudo version 1 (Cove's, through the sandbox's agent)")
					return Request{}, 0, true
				case 'h':
					fmt.Println(usage)
					return Request{}, 0, true
				case 'u':
					if rest := a[j+1:]; rest != "" {
						req.User = rest
					} else if i+1 < len(args) {
						i++
						req.User = args[i]
					} else {
						return fail("option requires an argument -- 'u'")
					}
					j = len(a)
				default:
					return fail(fmt.Sprintf("invalid option -- '%c'", a[j]))
				}
			}
		default:
			break options
		}
	}
	for ; i < len(args); i++ {
		k, v, ok := strings.Cut(args[i], "=")
		if !ok || k == "" || strings.ContainsAny(k, "/ ") {
			break
		}
		if req.Set == nil {
			req.Set = map[string]string{}
		}
		req.Set[k] = v
	}
	req.Argv = args[i:]
	if len(req.Argv) == 0 && !req.Login && !req.Shell {
		return fail("a command is required")
	}
	return req, 0, false
}

// run sends req to the agent and relays until the command ends.
func run(req Request) (int, error) {
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: SocketName, Net: "unixpacket"})
	if err != nil {
		return 0, fmt.Errorf("the sandbox's agent does not answer (%v)", err)
	}
	defer conn.Close()
	body, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	// Who asks goes with the request as SCM_CREDENTIALS, which the kernel
	// checks (a process can claim only its own ids).
	oob := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	if req.PTY == nil {
		oob = append(oob, unix.UnixRights(0, 1, 2)...)
	}
	if _, _, err := conn.WriteMsgUnix(body, oob, nil); err != nil {
		return 0, fmt.Errorf("ask the agent: %w", err)
	}
	first, master, err := receive(conn)
	if err != nil {
		return 0, err
	}
	if first.Error != "" {
		return 0, errors.New(first.Error)
	}
	msgs := make(chan Message, 1)
	go func() {
		defer close(msgs)
		for {
			m, f, err := receive(conn)
			if f != nil {
				f.Close()
			}
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	var relayed chan struct{}
	if master != nil {
		defer master.Close()
		if old, err := term.MakeRaw(0); err == nil {
			defer func() { _ = term.Restore(0, old) }()
		}
		relayed = relay(master)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGWINCH {
				if master != nil {
					if cols, rows, err := term.GetSize(0); err == nil {
						_ = pty.Setsize(master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
					}
				}
				continue
			}
			if master != nil && sig == syscall.SIGINT {
				continue // the terminal's own ^C reaches the command
			}
			b, _ := json.Marshal(Message{Signal: int(sig.(syscall.Signal))})
			_, _ = conn.Write(b)
		case m, ok := <-msgs:
			if !ok {
				return 0, errors.New("the agent closed the connection before the command ended")
			}
			if m.Error != "" {
				return 0, errors.New(m.Error)
			}
			if m.Exit == nil {
				continue
			}
			if relayed != nil {
				select { // the last output still in the terminal
				case <-relayed:
				case <-time.After(500 * time.Millisecond):
				}
			}
			return *m.Exit, nil
		}
	}
}

// relay copies between this process's terminal and the command's; the
// channel closes once the command's output ends.
func relay(master *os.File) chan struct{} {
	go func() { _, _ = io.Copy(master, os.Stdin) }()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(os.Stdout, master)
		close(done)
	}()
	return done
}

// receive reads one message and the file it may carry.
func receive(conn *net.UnixConn) (Message, *os.File, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return Message{}, nil, err
	}
	if n == 0 {
		return Message{}, nil, io.EOF
	}
	var f *os.File
	if oobn > 0 {
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cmsgs) > 0 {
			if fds, err := unix.ParseUnixRights(&cmsgs[0]); err == nil && len(fds) > 0 {
				f = os.NewFile(uintptr(fds[0]), "pty")
				for _, fd := range fds[1:] {
					unix.Close(fd)
				}
			}
		}
	}
	var m Message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		if f != nil {
			f.Close()
		}
		return Message{}, nil, fmt.Errorf("a malformed answer from the agent: %v", err)
	}
	return m, f, nil
}
