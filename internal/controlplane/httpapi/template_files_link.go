package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
)

// templateFiles is the answer of GET /templates/{templateID}/files/{hash}.
type templateFiles struct {
	Present bool   `json:"present"`
	URL     string `json:"url,omitempty"`
}

// templateFilesLink serves GET /templates/{templateID}/files/{hash}: 201
// with whether the caller's team uploaded the COPY step's files and, when
// not, a link to PUT them to, signed for the team and expiring.
func (a *API) templateFilesLink(w http.ResponseWriter, r *http.Request) {
	id, hash := r.PathValue("templateID"), r.PathValue("hash")
	present, up, err := a.templates.Files(r.Context(), team(r), id, hash)
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
		q := url.Values{"team": {up.Team}, "expires": {strconv.FormatInt(up.Expires.Unix(), 10)}, "token": {up.Token}}
		u := url.URL{Scheme: scheme, Host: r.Host, Path: "/templates/" + id + "/files/" + hash, RawQuery: q.Encode()}
		out.URL = u.String()
	}
	writeJSON(w, http.StatusCreated, out)
}
