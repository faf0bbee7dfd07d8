package codeinterp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// router hands a kernel's messages to the run they answer.
type router struct {
	in chan message // what the kernel sent, in order

	mu     sync.Mutex
	active *run // the run messages are dispatched to
	done   chan struct{}
}

func newRouter() router { return router{in: make(chan message, 64), done: make(chan struct{})} }

func (k *router) setActive(r *run) {
	k.mu.Lock()
	k.active = r
	k.mu.Unlock()
}

// dispatch hands each message to the run it answers; a run ends when the
// kernel has replied and is idle again, or has died.
func (k *router) dispatch() {
	for {
		select {
		case m := <-k.in:
			k.route(m)
		case <-k.done:
			for drained := false; !drained; { // what came before the end
				select {
				case m := <-k.in:
					k.route(m)
				default:
					drained = true
				}
			}
			k.mu.Lock()
			r := k.active
			k.mu.Unlock()
			if r != nil {
				k.finish(r, errKernelDied)
			}
			return
		}
	}
}

// finish ends r, the active run.
func (k *router) finish(r *run, err error) {
	k.mu.Lock()
	if k.active == r {
		k.active = nil
	}
	k.mu.Unlock()
	r.err = err
	close(r.msgs)
}

// handshake asks for the kernel's info until it answers and is idle again
// (over ZeroMQ: until its IOPub messages reach us, a subscription only
// takes effect once the kernel has seen it).
func (k *router) handshake(ctx context.Context, send func(message) error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		m, err := newMessage(newID(), "kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		r := newRun(m.Header.MsgID)
		k.setActive(r)
		if err := send(m); err != nil {
			return err
		}
		timer := time.NewTimer(500 * time.Millisecond)
	wait:
		for {
			select {
			case _, ok := <-r.msgs:
				if !ok {
					timer.Stop()
					if r.err != nil {
						return r.err
					}
					return nil // answered, and its status came on IOPub
				}
			case <-timer.C:
				break wait
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("no answer to kernel_info_request: %w", ctx.Err())
			}
		}
		k.setActive(nil)
	}
}

// route hands m to the run it answers and ends the run once the kernel has
// replied and is idle again.
func (k *router) route(m message) {
	k.mu.Lock()
	r := k.active
	k.mu.Unlock()
	if r == nil || m.Parent.MsgID != r.id {
		return
	}
	switch {
	case strings.HasSuffix(m.Header.MsgType, "_reply"):
		r.reply, r.replied = m.Content, true
	case m.Header.MsgType == "status":
		var st struct {
			State string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &st) == nil && st.State == "idle" {
			r.idle = true
		}
	default:
		r.msgs <- m // the run's reader drains it until it is closed
	}
	if r.replied && r.idle {
		k.finish(r, nil)
	}
}
