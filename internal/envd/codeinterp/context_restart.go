package codeinterp

import (
	"net/http"
)

// restartContext is POST /contexts/{id}/restart: a fresh kernel of the
// same language in the same directory, once the running execution ended.
func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.ctxs.get(id)
	if !ok {
		writeText(w, http.StatusNotFound, "Context "+id+" not found")
		return
	}
	old := c.kernel()
	// The running execution, if any, ends with its kernel.
	_ = old.close()
	if err := c.acquire(r.Context()); err != nil {
		return
	}
	defer c.release()
	k, err := s.startKernel(r.Context(), c.Language, c.Cwd)
	if err != nil {
		s.log.Error("restart context", "context", id, "err", err)
		writeText(w, http.StatusInternalServerError, err.Error())
		return
	}
	c.mu.Lock()
	c.k, c.sandboxEnv = k, nil
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, nil)
}
