package codeinterp

import (
	"net/http"
)

// listContexts is GET /contexts, oldest first.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.ctxs.list())
}
