package codeinterp

import (
	"net/http"
)

// deleteContext is DELETE /contexts/{id}.
func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.ctxs.remove(id)
	if !ok {
		writeText(w, http.StatusNotFound, "Context "+id+" not found")
		return
	}
	if k := c.kernel(); k != nil {
		_ = k.close()
	}
	writeJSON(w, http.StatusOK, nil)
}
