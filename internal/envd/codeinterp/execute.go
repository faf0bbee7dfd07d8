package codeinterp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// maxRequestBytes caps an execution's request body (10 MB of code fits).
const maxRequestBytes = 16 << 20

type executeRequest struct {
	Code      json.RawMessage   `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// execute is POST /execute: it runs code in a context and streams what the
// kernel publishes as NDJSON lines.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	var req executeRequest
	body := http.MaxBytesReader(w, r.Body, maxRequestBytes)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeText(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request is larger than %d MiB", maxRequestBytes>>20))
			return
		}
		writeText(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	var code string
	if len(req.Code) == 0 || json.Unmarshal(req.Code, &code) != nil {
		writeText(w, http.StatusBadRequest, "code must be a string")
		return
	}
	for name := range req.EnvVars {
		if !validEnvName(name) {
			writeText(w, http.StatusBadRequest, fmt.Sprintf("env_vars: %q is not a valid variable name", name))
			return
		}
	}
	ctxID, lang := deref(req.ContextID), deref(req.Language)
	if ctxID != "" && lang != "" {
		writeText(w, http.StatusBadRequest, "Only one of context_id or language can be provided")
		return
	}
	var c *codeContext
	if ctxID != "" {
		var ok bool
		if c, ok = s.ctxs.get(ctxID); !ok {
			writeText(w, http.StatusNotFound, "Context "+ctxID+" not found")
			return
		}
	} else {
		var err error
		if c, err = s.defaultContext(r.Context(), lang); err != nil {
			s.contextError(w, "start a default context", err)
			return
		}
	}
	env := requestEnv(r)
	norm, _ := normalizeLanguage(lang)
	typescript := norm == "typescript" || c.Language == "typescript"
	out := newStream(w, s.cfg.MaxOutputBytes, s.cfg.Keepalive)
	defer out.stop()
	out.valuesDisplayed = c.Language == "r"
	if err := c.acquire(r.Context()); err != nil {
		return
	}
	defer c.release()
	k, err := s.kernelOf(r.Context(), c)
	if err != nil {
		out.error("KernelError", fmt.Sprintf("the %s kernel of context %s did not start: %v", c.Language, c.ID, err), "")
		return
	}
	if err := s.prepareEnv(c, k, env, req.EnvVars); err != nil {
		out.error("EnvironmentError", err.Error(), "")
		return
	}
	s.runCell(r.Context(), c, k, dedent(code), runOpts{typescript: typescript}, out)
	if err := s.restoreEnv(c, k, env, req.EnvVars); err != nil {
		s.log.Warn("restore the environment after an execution", "context", c.ID, "err", err)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// defaultContext is the context an execute without context_id uses: the
// language's default one, started now if it has none.
func (s *Server) defaultContext(ctx context.Context, language string) (*codeContext, error) {
	lang, err := normalizeLanguage(language)
	if err != nil {
		return nil, errBadRequest{err.Error()}
	}
	if lang == "typescript" { // runs on the JavaScript kernel
		lang = "javascript"
	}
	s.ctxs.mu.Lock()
	c := s.ctxs.defaults[lang]
	s.ctxs.mu.Unlock()
	if c != nil {
		return c, nil
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.ctxs.mu.Lock()
	c = s.ctxs.defaults[lang]
	s.ctxs.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return s.newContext(ctx, lang, s.cfg.Cwd, true, true)
}

// runCell runs src in c's kernel k and streams its messages. A request
// that ends (the client went away or timed out) interrupts the code; code
// that does not stop within Config.InterruptGrace gets a fresh kernel.
func (s *Server) runCell(ctx context.Context, c *codeContext, k kernel, src string, opts runOpts, out *stream) {
	rn, err := k.start(src, opts)
	if errors.Is(err, errKernelDied) {
		out.error("DeadKernelError", deadKernelText(c), "")
		return
	}
	if err != nil {
		out.error("ExecutionError", err.Error(), "")
		return
	}
	done := ctx.Done()
	var interrupted, retry <-chan time.Time
	for {
		select {
		case m, ok := <-rn.msgs:
			if !ok {
				if rn.err != nil {
					out.error("DeadKernelError", deadKernelText(c), "")
					return
				}
				var rep executeReply
				out.endValues()
				if json.Unmarshal(rn.reply, &rep) == nil && rep.ExecutionCount > 0 {
					out.line(map[string]any{"type": "number_of_executions", "execution_count": rep.ExecutionCount})
				}
				out.end()
				return
			}
			if done != nil {
				out.message(m)
			}
		case <-done:
			done = nil
			if err := k.interrupt(); err != nil {
				s.log.Warn("interrupt", "context", c.ID, "err", err)
			}
			interrupted = time.After(s.cfg.InterruptGrace)
			again := time.NewTicker(time.Second)
			defer again.Stop()
			retry = again.C
		case <-retry:
			// A signal that came while the kernel could not take it (an
			// output flood in its own I/O code) is lost: again, until the
			// grace is over.
			_ = k.interrupt()
		case <-interrupted:
			s.log.Warn("interrupted code did not stop: restarting its kernel", "context", c.ID)
			s.replaceKernel(c, k)
			for range rn.msgs { // closed once the old kernel is gone
			}
			return
		}
	}
}

func deadKernelText(c *codeContext) string {
	return fmt.Sprintf("the %s kernel of context %s died (killed, out of memory or exited); restart the context: POST /contexts/%s/restart", c.Language, c.ID, c.ID)
}

// kernelOf returns c's kernel, starting it when c has none yet (a context
// made by POST /contexts, or restarted). The caller holds c's lock.
func (s *Server) kernelOf(ctx context.Context, c *codeContext) (kernel, error) {
	if k := c.kernel(); k != nil {
		return k, nil
	}
	k, err := s.startKernel(ctx, c.Language, c.Cwd)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.k, c.sandboxEnv = k, nil
	c.mu.Unlock()
	return k, nil
}

// replaceKernel ends c's kernel k and starts another in its place.
func (s *Server) replaceKernel(c *codeContext, k kernel) {
	_ = k.close()
	nk, err := s.startKernel(context.Background(), c.Language, c.Cwd)
	if err != nil {
		s.log.Error("restart a kernel", "context", c.ID, "err", err)
		return
	}
	c.mu.Lock()
	c.k, c.sandboxEnv = nk, nil
	c.mu.Unlock()
}

// stream writes an execution's NDJSON lines, with a keepalive line after
// Config.Keepalive of silence.
type stream struct {
	mu      sync.Mutex
	w       io.Writer
	flush   func()
	last    time.Time
	written int
	// maxOutput caps the output's bytes (Config.MaxOutputBytes).
	maxOutput int
	capped    bool
	stopped   chan struct{}
	every     time.Duration // keepalive after this much silence
	// valuesDisplayed: the kernel shows each top-level expression's value
	// as a display (IRkernel), not as the execution's result (IPython's
	// execute_result). The last value shown is the main result, as the
	// last expression's is in Python: each is held until the next value
	// or the execution's end says which is last.
	valuesDisplayed bool
	held            map[string]any
}

func newStream(w http.ResponseWriter, maxOutput int, keepalive time.Duration) *stream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	s := &stream{w: w, flush: func() { _ = rc.Flush() }, last: time.Now(), stopped: make(chan struct{}), maxOutput: maxOutput, every: keepalive}
	s.flush()
	go s.keepalive()
	return s
}

func (s *stream) keepalive() {
	t := time.NewTicker(s.every / 5)
	defer t.Stop()
	for {
		select {
		case <-s.stopped:
			return
		case now := <-t.C:
			s.mu.Lock()
			if now.Sub(s.last) >= s.every {
				s.writeLocked(map[string]any{"type": "keepalive"})
			}
			s.mu.Unlock()
		}
	}
}

func (s *stream) stop() { close(s.stopped) }

func (s *stream) line(v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeLocked(v)
}

func (s *stream) writeLocked(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	_, _ = s.w.Write(append(b, '\n'))
	s.flush()
	s.last = time.Now()
}

func (s *stream) error(name, value, traceback string) {
	s.endValues()
	s.line(map[string]any{"type": "error", "name": name, "value": value, "traceback": traceback})
	s.end()
}

func (s *stream) end() { s.line(map[string]any{"type": "end_of_execution"}) }

// output writes stdout or stderr text, within maxOutputBytes.
func (s *stream) output(name, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capped {
		return
	}
	s.written += len(text)
	if s.written > s.maxOutput {
		s.capped = true
		name, text = "stderr", fmt.Sprintf("\n[cove: output past %d bytes is dropped; the code runs on]\n", s.maxOutput)
	}
	s.writeLocked(map[string]any{"type": name, "text": text, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
}
