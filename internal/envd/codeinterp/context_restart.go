package codeinterp

import (
	"net/http"
)

// restartContext is POST /contexts/{id}/restart: the context's kernel
// ends (and with it the running execution, if any); a fresh one of the
// same language in the same directory starts at its next execution.
func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.ctxs.get(id)
	if !ok {
		writeText(w, http.StatusNotFound, "Context "+id+" not found")
		return
	}
	if old := c.kernel(); old != nil {
		_ = old.close()
	}
	if err := c.acquire(r.Context()); err != nil {
		return
	}
	defer c.release()
	c.mu.Lock()
	c.k, c.sandboxEnv = nil, nil
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, nil)
}
