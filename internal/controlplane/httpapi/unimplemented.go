package httpapi

import (
	"net/http"

	"github.com/covesandbox/cove/internal/errs"
)

// Endpoints later work owns answer 501 with what is missing.
var later = map[string]string{
	"POST /templates": "the v1 template build (a Dockerfile pushed to a registry) is deprecated; build with POST /v3/templates",
}

func (a *API) unimplemented() {
	for pattern, msg := range later {
		a.handle(pattern, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, errs.New(errs.Unimplemented, "%s", msg))
		})
	}
}
