package codeinterp

import (
	"encoding/json"
	"errors"
)

// kernel runs the code of one context. Its methods are called by one
// execution at a time (the context's lock).
type kernel interface {
	// start sends code to run and returns the run that streams the
	// messages the kernel publishes for it.
	start(code string, opts runOpts) (*run, error)
	// setEnv sets and unsets environment variables in the kernel.
	setEnv(set map[string]string, unset []string) error
	// interrupt stops the running code (KeyboardInterrupt and the like).
	interrupt() error
	// exited is closed once the kernel's process has ended.
	exited() <-chan struct{}
	// close ends the kernel and releases what it holds.
	close() error
}

// run is one execution in a kernel: its messages arrive on msgs, which is
// closed when the kernel is idle again and has answered (or has died).
type run struct {
	id   string
	msgs chan message

	reply   json.RawMessage // the execute_reply's content, once msgs is closed
	idle    bool
	replied bool
	err     error // why the run ended early (the kernel died)
}

func newRun(id string) *run { return &run{id: id, msgs: make(chan message, 64)} }

// errKernelDied ends the runs of a kernel whose process exited.
var errKernelDied = errors.New("the kernel died")

// executeReply is what an execute_reply says.
type executeReply struct {
	Status         string `json:"status"`
	ExecutionCount int    `json:"execution_count"`
	EName          string `json:"ename"`
	EValue         string `json:"evalue"`
}

// runOpts say how to run code.
type runOpts struct {
	silent     bool // nothing published, no history
	typescript bool // compile the code from TypeScript first (JavaScript kernel)
}
