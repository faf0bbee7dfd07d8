package httpapi

import (
	"net/http"
	"net/url"
)

// templateFiles is the answer of GET /templates/{templateID}/files/{hash}.
type templateFiles struct {
	Present bool   `json:"present"`
	URL     string `json:"url,omitempty"`
}

// templateFilesLink serves GET /templates/{templateID}/files/{hash}: 201
// with whether the COPY step's files are stored and, when not, a signed
// link to PUT them to.
func (a *API) templateFilesLink(w http.ResponseWriter, r *http.Request) {
	id, hash := r.PathValue("templateID"), r.PathValue("hash")
	present, err := a.templates.Files(r.Context(), team(r), id, hash)
	if err != nil {
		writeError(w, err)
		return
	}
	out := templateFiles{Present: present}
	if !present {
		scheme := "http"
		if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: r.Host, Path: "/templates/" + id + "/files/" + hash,
			RawQuery: url.Values{"token": {a.templates.FilesToken(id, hash)}}.Encode()}
		out.URL = u.String()
	}
	writeJSON(w, http.StatusCreated, out)
}
