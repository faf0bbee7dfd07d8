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
	c, err := s.newContext(r.Context(), lang, cwd, false, false)
	if err != nil {
		s.contextError(w, "create a "+lang+" context", err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
