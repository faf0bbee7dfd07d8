// Package process implements the agent's process.Process Connect service:
// start commands (with pipes or a PTY) as a sandbox user, stream their
// output, feed their input, signal them and report how they ended.
package process

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/covesandbox/cove/internal/envd/settings"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
	"github.com/covesandbox/cove/sdk/go/envdpb/process/processconnect"
)

// Options configure a Service.
type Options struct {
	// Init is true when the agent is the sandbox's PID 1 and must reap orphans.
	Init bool
	// OOMKills returns how many times the kernel's OOM killer has struck in
	// the sandbox so far; nil when unknown. Used to tell an OOM kill from a
	// plain SIGKILL in a process's end event.
	OOMKills func() (uint64, error)
	// DefaultPath is PATH for processes when the agent's own is unset.
	DefaultPath string
	// Spawn, when set, runs each fork: the sandbox's init forks from the one
	// thread that holds the sandbox's bounding set and cgroup namespace.
	Spawn func(fork func() (int, error)) (int, error)
	// OutputRate caps the bytes per second all processes' output may reach
	// subscribers at, together (0: no cap). Each byte relayed costs the
	// host's CPU outside the sandbox's own limits: a process printing as
	// fast as it can (`yes`) took neighbours' commands to 3× their time on a
	// 2-core host. A process held back blocks on its full pipe.
	OutputRate int
}

// outputBurst is how much output may go at once above OutputRate.
const outputBurst = 4 << 20

// Service implements processconnect.ProcessHandler.
type Service struct {
	settings *settings.Settings
	log      *slog.Logger
	opts     Options
	reaper   *reaper
	output   *rate.Limiter // nil: no cap

	mu    sync.Mutex
	procs map[uint32]*proc
}

var _ processconnect.ProcessHandler = (*Service)(nil)

// New returns a Service. log is the agent's logger.
func New(st *settings.Settings, log *slog.Logger, opts Options) *Service {
	if opts.DefaultPath == "" {
		opts.DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	s := &Service{settings: st, log: log, opts: opts, reaper: newReaper(opts.Init), procs: map[uint32]*proc{}}
	if opts.OutputRate > 0 {
		s.output = rate.NewLimiter(rate.Limit(opts.OutputRate), outputBurst)
	}
	return s
}

// find returns the process the selector names, running or recently ended.
func (s *Service) find(sel *pb.ProcessSelector) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if p, ok := s.procs[v.Pid]; ok {
			return p, nil
		}
		return nil, errs.New(errs.NotFound, "process with pid %d not found", v.Pid)
	case *pb.ProcessSelector_Tag:
		for _, p := range s.procs {
			if p.tag != nil && *p.tag == v.Tag {
				return p, nil
			}
		}
		return nil, errs.New(errs.NotFound, "process with tag %q not found", v.Tag)
	default:
		return nil, errs.New(errs.InvalidArgument, "process selector is empty")
	}
}

// findRunning is find restricted to processes that have not ended (not
// reaped yet).
func (s *Service) findRunning(sel *pb.ProcessSelector) (*proc, error) {
	p, err := s.find(sel)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.reaped:
		return nil, errs.New(errs.NotFound, "process %d is not running", p.pid)
	default:
		return p, nil
	}
}

func (s *Service) add(p *proc) {
	s.mu.Lock()
	s.procs[p.pid] = p
	s.mu.Unlock()
}

// forgetLater drops an ended process from the table after endRetention.
func (s *Service) forgetLater(p *proc) {
	time.AfterFunc(endRetention, func() {
		s.mu.Lock()
		if s.procs[p.pid] == p {
			delete(s.procs, p.pid)
		}
		s.mu.Unlock()
	})
}

func (s *Service) oomCount() uint64 {
	if s.opts.OOMKills == nil {
		return 0
	}
	n, err := s.opts.OOMKills()
	if err != nil {
		return 0
	}
	return n
}

func agentPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return ""
}
