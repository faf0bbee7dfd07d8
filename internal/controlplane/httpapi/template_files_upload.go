package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

// uploadTemplateFiles serves the PUT of a signed upload link. The token,
// not an API key, authorizes it, as a storage bucket's signed URL would.
func (a *API) uploadTemplateFiles(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > template.MaxFilesBytes {
		writeError(w, errs.New(errs.InvalidArgument, "files archive is larger than %d bytes", template.MaxFilesBytes))
		return
	}
	q := r.URL.Query()
	exp, _ := strconv.ParseInt(q.Get("expires"), 10, 64)
	up := service.FilesUpload{Team: q.Get("team"), Expires: time.Unix(exp, 0), Token: q.Get("token")}
	err := a.templates.PutFiles(r.Context(), r.PathValue("templateID"), r.PathValue("hash"), up, r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
