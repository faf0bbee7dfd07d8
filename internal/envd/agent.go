package envd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/covesandbox/cove/internal/envd/envdwire"
	"github.com/covesandbox/cove/internal/envd/process"
	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/isolation"
)

// SandboxOutputRate caps the output of a sandbox's processes, all together,
// in bytes per second (see process.Options.OutputRate).
const SandboxOutputRate = 16 << 20

// RunConfig configures a running agent.
type RunConfig struct {
	Addr    string // listen address, default ":49983"
	Fixed   map[string]string
	ReadyFD int // when > 0, one byte is written here once the agent listens
	OOMFD   int // when > 0, a file whose "oom_kill N" line counts OOM kills
	// Spawn, when set, runs every fork of a process (see process.Options).
	Spawn func(fork func() (int, error)) (int, error)
	// Initial settings apply before the agent listens, as an /init would.
	Initial settings.Update
	// NewBoot, when set, gives the sandbox a new boot id (Config.NewBoot).
	NewBoot func() error
}

// Run serves the agent until ctx ends. As PID 1 it also reaps orphans and
// makes itself non-dumpable, so code in the sandbox cannot ptrace it.
func Run(ctx context.Context, cfg RunConfig, log *slog.Logger) error {
	if cfg.Addr == "" {
		cfg.Addr = ":" + strconv.Itoa(envdwire.Port)
	}
	init := os.Getpid() == 1
	if init {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("set non-dumpable: %w", err)
		}
	}
	opts := Config{Fixed: cfg.Fixed, NewBoot: cfg.NewBoot}
	opts.Process.Init = init
	opts.Process.Spawn = cfg.Spawn
	if init {
		opts.Process.OutputRate = SandboxOutputRate
	}
	if cfg.OOMFD > 0 {
		unix.CloseOnExec(cfg.OOMFD)
		fd := cfg.OOMFD
		opts.Process.OOMKills = func() (uint64, error) {
			buf := make([]byte, 512)
			n, err := unix.Pread(fd, buf, 0)
			if err != nil {
				return 0, err
			}
			return isolation.ParseOOMKills(buf[:n]), nil
		}
	}
	if init {
		// The sandbox's own commands come first on every process's PATH.
		os.Setenv("PATH", sudo.BinDir+":"+cmp.Or(os.Getenv("PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
	}
	agent := New(opts, log)
	agent.settings.Apply(cfg.Initial)
	if init {
		if err := installCommands(); err != nil {
			log.Warn("install the sandbox's commands", "dir", sudo.BinDir, "err", err)
		}
		ln, err := process.ListenSudo()
		if err != nil {
			return fmt.Errorf("sudo socket: %w", err)
		}
		go agent.process.ServeSudo(ctx, ln)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	if cfg.ReadyFD > 0 {
		ready := os.NewFile(uintptr(cfg.ReadyFD), "ready")
		_, err := ready.Write([]byte{1})
		ready.Close()
		if err != nil {
			return fmt.Errorf("signal readiness: %w", err)
		}
	}
	return Serve(ctx, ln, agent)
}

// installCommands makes the sandbox's own commands in sudo.BinDir: sudo
// (the sandbox binary, which runs as sudo by that name), and python where
// the template has only python3, as E2B's base has it.
func installCommands() error {
	self := sudo.Binary
	if err := os.MkdirAll(sudo.BinDir, 0o755); err != nil {
		return err
	}
	links := map[string]string{"sudo": self}
	if _, err := exec.LookPath("python"); err != nil {
		if p, err := exec.LookPath("python3"); err == nil {
			links["python"] = p
		}
	}
	for name, target := range links {
		p := filepath.Join(sudo.BinDir, name)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	// Login shells (commands run as bash -l) set PATH anew from
	// /etc/profile, which then reads profile.d.
	if err := os.MkdirAll("/etc/profile.d", 0o755); err != nil {
		return err
	}
	return os.WriteFile("/etc/profile.d/00-cove.sh", []byte(profileScript), 0o644)
}

const profileScript = `# Cove: the sandbox's own commands (sudo; python where only python3 is) first on PATH.
case ":$PATH:" in *:` + sudo.BinDir + `:*) ;; *) PATH="` + sudo.BinDir + `:$PATH" ;; esac
`

// Serve serves h on ln until ctx ends, then shuts down within 2 s: how the
// in-sandbox servers (the agent, the code interpreter) serve. Connections
// stay idle up to 640 s, as E2B's do.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, IdleTimeout: 640 * time.Second, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
