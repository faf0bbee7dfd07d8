package codeinterp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// createContext is POST /contexts {"language"?, "cwd"?}.
func (s *Server) createContext(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Language *string `json:"language"`
		Cwd      *string `json:"cwd"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeText(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	lang, cwd := "", ""
	if req.Language != nil {
		lang = *req.Language
	}
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	if _, err := normalizeLanguage(lang); err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	c, err := s.newContext(r.Context(), lang, cwd, false)
	var bad errBadRequest
	switch {
	case errors.As(err, &bad):
		writeText(w, http.StatusBadRequest, bad.msg)
	case err != nil:
		s.log.Error("create context", "language", lang, "err", err)
		writeText(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, c)
	}
}

// listContexts is GET /contexts, oldest first.
func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.ctxs.list())
}

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

// deleteContext is DELETE /contexts/{id}.
func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := s.ctxs.remove(id)
	if !ok {
		writeText(w, http.StatusNotFound, "Context "+id+" not found")
		return
	}
	_ = c.kernel().close()
	writeJSON(w, http.StatusOK, nil)
}
