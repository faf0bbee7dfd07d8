package codeinterp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Languages are the languages a context may have, in the order 400s name
// them; typescript runs on the JavaScript kernel, compiled first.
var Languages = []string{"python", "javascript", "typescript", "r", "java", "bash"}

// normalizeLanguage lower-cases l and expands its short names; "" is python.
func normalizeLanguage(l string) (string, error) {
	l = strings.ToLower(strings.TrimSpace(l))
	switch l {
	case "":
		return "python", nil
	case "js":
		return "javascript", nil
	case "ts":
		return "typescript", nil
	}
	for _, known := range Languages {
		if l == known {
			return l, nil
		}
	}
	return "", fmt.Errorf("language %q is not supported: use one of %s", l, strings.Join(Languages, ", "))
}

// codeContext is one context: a kernel of one language in a directory.
// Executions in it run one at a time, in the order they came.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	created  time.Time

	lock chan struct{} // held (full) by the running execution
	mu   sync.Mutex    // guards k and sandboxEnv
	k    kernel
	// sandboxEnv is the sandbox's environment as last set in the kernel.
	sandboxEnv map[string]string
}

// acquire waits for the context's running execution to end.
func (c *codeContext) acquire(ctx context.Context) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *codeContext) release() { <-c.lock }

func (c *codeContext) kernel() kernel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.k
}

// contexts is the server's set of contexts.
type contexts struct {
	mu       sync.Mutex
	byID     map[string]*codeContext
	defaults map[string]*codeContext // the context a language-only execute uses
	starting int                     // contexts reserved whose kernels start
}

// reserve holds a place for a context whose kernel starts, if fewer than
// max are alive or starting.
func (cs *contexts) reserve(max int) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.byID)+cs.starting >= max {
		return false
	}
	cs.starting++
	return true
}

// unreserve gives back a place whose kernel did not start.
func (cs *contexts) unreserve() {
	cs.mu.Lock()
	cs.starting--
	cs.mu.Unlock()
}

func (cs *contexts) get(id string) (*codeContext, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[id]
	return c, ok
}

// add adds a context whose place was reserved.
func (cs *contexts) add(c *codeContext, asDefault bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.starting--
	cs.byID[c.ID] = c
	if asDefault {
		cs.defaults[c.Language] = c
	}
}

// remove forgets the context id and returns it.
func (cs *contexts) remove(id string) (*codeContext, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[id]
	if !ok {
		return nil, false
	}
	delete(cs.byID, id)
	for l, d := range cs.defaults {
		if d == c {
			delete(cs.defaults, l)
		}
	}
	return c, true
}

// list returns the contexts oldest first.
func (cs *contexts) list() []*codeContext {
	cs.mu.Lock()
	out := make([]*codeContext, 0, len(cs.byID))
	for _, c := range cs.byID {
		out = append(out, c)
	}
	cs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}
