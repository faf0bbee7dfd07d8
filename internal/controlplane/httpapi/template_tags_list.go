package httpapi

import (
	"net/http"
	"sort"
)

type templateTag struct {
	Tag       string `json:"tag"`
	BuildID   string `json:"buildID"`
	CreatedAt string `json:"createdAt"`
}

// templateTags serves GET /templates/{templateID}/tags.
func (a *API) templateTags(w http.ResponseWriter, r *http.Request) {
	rec, err := a.templates.Get(team(r), r.PathValue("templateID"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := []templateTag{}
	for tag, id := range rec.Tags {
		t := templateTag{Tag: tag, BuildID: id}
		if b := rec.Build(id); b != nil {
			t.CreatedAt = b.CreatedAt.Format("2006-01-02T15:04:05Z07:00")
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	writeJSON(w, http.StatusOK, out)
}
