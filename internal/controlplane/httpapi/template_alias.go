package httpapi

import "net/http"

// templateAlias serves GET /templates/aliases/{alias}: 200 for the team's
// own or a built-in template of that name, 404 for none. Names are a
// team's own: another team's template of that name is none (404, never
// 403, which would tell that it exists).
func (a *API) templateAlias(w http.ResponseWriter, r *http.Request) {
	rec, err := a.templates.Get(team(r), r.PathValue("sub"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": rec.ID, "public": rec.Public})
}
