package process

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reaper collects the exit status of the processes the agent starts. As a
// sandbox's init (PID 1) the agent also inherits every orphan; in that mode
// one loop waits for any child, hands tracked statuses to their owners and
// discards the rest, so zombies never pile up. Outside PID 1 (tests, tools)
// each process is waited for by pid, leaving the host process's other
// children alone.
type reaper struct {
	global  bool
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
	spawned chan struct{} // wakes the loop from "no children"
}

func newReaper(global bool) *reaper {
	r := &reaper{global: global, waiters: map[int]chan unix.WaitStatus{}, spawned: make(chan struct{}, 1)}
	if global {
		// An orphan handed to PID 1 while it had no child wakes it too.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGCHLD)
		go func() {
			for range sigs {
				r.wake()
			}
		}()
		go r.loop()
	}
	return r
}

// start runs spawn with the table locked, so a child that exits at once is
// still matched to its waiter. It returns the pid and a channel that receives
// the exit status once.
func (r *reaper) start(spawn func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := spawn()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	if r.global {
		r.waiters[pid] = ch
		r.wake()
		return pid, ch, nil
	}
	go func() {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if err != unix.EINTR {
				break
			}
		}
		ch <- ws
	}()
	return pid, ch, nil
}

func (r *reaper) wake() {
	select {
	case r.spawned <- struct{}{}:
	default:
	}
}

// loop reaps every child as it ends: a blocking wait for any child (no
// reliance on SIGCHLD, whose delivery can race a child's exit and leave a
// zombie no signal will announce), parked while there is none.
func (r *reaper) loop() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			<-r.spawned // no children: wait for the next one
			continue
		case err != nil || pid <= 0:
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.mu.Lock()
		if ch, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			ch <- ws
		}
		r.mu.Unlock()
	}
}
