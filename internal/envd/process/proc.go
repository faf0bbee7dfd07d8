package process

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// endRetention is how long an exited process stays findable, so Connect can
// still replay its end event.
const endRetention = 30 * time.Second

// subscriber is one stream watching a process's events.
type subscriber struct {
	ch   chan *pb.ProcessEvent
	done chan struct{} // closed when the stream goes away
}

// proc is one process started through Start.
type proc struct {
	pid    uint32
	tag    *string
	config *pb.ProcessConfig

	pty   *os.File // master side; nil without a PTY
	stdin *os.File // write end of the stdin pipe; nil when stdin is /dev/null or a PTY

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	end    *pb.ProcessEvent_EndEvent // set once the process has ended
	reaped chan struct{}             // closed once its wait status is in: the pid is gone
	exited chan struct{}             // closed after end is set and sent
	stdinM sync.Mutex                // serializes writes and close of stdin
}

func newProc(cfg *pb.ProcessConfig, tag *string) *proc {
	return &proc{config: cfg, tag: tag, subs: map[*subscriber]struct{}{}, reaped: make(chan struct{}), exited: make(chan struct{})}
}

// subscribe registers a new stream; ended reports whether the process is
// already over (then sub gets nothing and the caller replays end itself).
func (p *proc) subscribe() (sub *subscriber, end *pb.ProcessEvent_EndEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil, p.end
	}
	sub = &subscriber{ch: make(chan *pb.ProcessEvent, 16), done: make(chan struct{})}
	p.subs[sub] = struct{}{}
	return sub, nil
}

func (p *proc) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.subs[sub]; ok {
		delete(p.subs, sub)
		close(sub.done)
	}
}

// publish delivers ev to every subscriber. It blocks while a subscriber's
// buffer is full, which back-pressures the process's output instead of
// dropping it; a subscriber that leaves unblocks it.
func (p *proc) publish(ev *pb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.done:
		}
	}
}

// finish records the end event, sends it and closes every subscription.
func (p *proc) finish(end *pb.ProcessEvent_EndEvent) {
	p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}})
	p.mu.Lock()
	p.end = end
	for s := range p.subs {
		close(s.ch)
		delete(p.subs, s)
	}
	p.mu.Unlock()
	close(p.exited)
}

// endEvent describes a wait status the way Go's os.ProcessState does, which
// is the text the E2B SDKs show ("exit status 1", "signal: killed").
func endEvent(ws unix.WaitStatus, oom bool) *pb.ProcessEvent_EndEvent {
	ev := &pb.ProcessEvent_EndEvent{Exited: ws.Exited()}
	switch {
	case ws.Exited():
		ev.ExitCode = int32(ws.ExitStatus())
		ev.Status = fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		ev.ExitCode = -1
		ev.Status = "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			ev.Status += " (core dumped)"
		}
	default:
		ev.ExitCode = -1
		ev.Status = fmt.Sprintf("wait status %d", int(ws))
	}
	if ev.ExitCode != 0 {
		msg := ev.Status
		if oom && ws.Signaled() && ws.Signal() == unix.SIGKILL {
			msg += " (out of memory: the sandbox reached its memory limit)"
		}
		ev.Error = &msg
	}
	return ev
}
