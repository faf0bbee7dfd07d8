package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
)

const maxListLimit = 100

// listSandboxes serves GET /v2/sandboxes: state, metadata, template (id
// or name) and start-time (startedAfter, startedBefore: RFC 3339,
// inclusive) filters, newest first (order=asc for oldest), pages of limit
// (≤ 100) continued by the X-Next-Token header's value.
func (a *API) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ListFilter{Team: team(r), Ascending: strings.EqualFold(q.Get("order"), "asc")}
	var err error
	if f.Limit, err = listLimit(q); err != nil {
		writeError(w, err)
		return
	}
	for _, st := range q["state"] {
		for _, s := range strings.Split(st, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f.States = append(f.States, sandboxes.State(s))
			}
		}
	}
	meta, err := parseMetadata(q.Get("metadata"))
	if err != nil {
		writeError(w, err)
		return
	}
	f.Metadata = meta
	if v := q.Get("template"); v != "" {
		f.Templates = a.templateRefs(team(r), v)
	}
	for name, at := range map[string]*time.Time{"startedAfter": &f.StartedAfter, "startedBefore": &f.StartedBefore} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, errs.New(errs.InvalidArgument, "%s must be an RFC 3339 time, like 2006-01-02T15:04:05Z: %q", name, v))
				return
			}
			*at = t
		}
	}
	if tok := q.Get("nextToken"); tok != "" {
		c, err := decodeCursor(tok)
		if err != nil {
			writeError(w, err)
			return
		}
		f.After = &c
	}
	f.Limit++ // one more tells whether a next page exists
	list, err := a.svc.List(r.Context(), f)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(list) == f.Limit {
		list = list[:f.Limit-1]
		last := list[len(list)-1]
		w.Header().Set("X-Next-Token", encodeCursor(store.Cursor{StartedAt: last.StartedAt, ID: last.ID}))
	}
	out := make([]sandboxDetail, len(list))
	for i, sb := range list {
		out[i] = toDetail(sb, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// listSandboxesV1 serves GET /sandboxes (running only, ?metadata=).
func (a *API) listSandboxesV1(w http.ResponseWriter, r *http.Request) {
	meta, err := parseMetadata(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := a.svc.List(r.Context(), store.ListFilter{Team: team(r), States: []sandboxes.State{sandboxes.StateRunning}, Metadata: meta})
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]sandboxDetail, len(list))
	for i, sb := range list {
		out[i] = toDetail(sb, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// templateRefs is what a template filter matches: the value as given
// (name or id, a tag dropped) and the id of the template it names, so
// sandboxes made by id and by name are both found.
func (a *API) templateRefs(team, ref string) []string {
	name, _, _ := strings.Cut(ref, ":")
	refs := []string{name}
	if rec, err := a.templates.Get(team, name); err == nil && rec.ID != name {
		refs = append(refs, rec.ID)
	}
	return refs
}

// parseMetadata reads the SDK's metadata filter: one query value holding
// URL-encoded "k=v&k2=v2".
func parseMetadata(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(v)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "malformed metadata filter: %v", err)
	}
	out := map[string]string{}
	for k, vs := range vals {
		out[k] = vs[0]
	}
	return out, nil
}

// listLimit is a list's page size: its limit parameter (1 to 100), else
// 100.
func listLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return maxListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, errs.New(errs.InvalidArgument, "limit must be between 1 and %d", maxListLimit)
	}
	return n, nil
}

func encodeCursor(c store.Cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.StartedAt.UTC().Format(time.RFC3339Nano) + "__" + c.ID))
}

func decodeCursor(tok string) (store.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return store.Cursor{}, errs.New(errs.InvalidArgument, "invalid nextToken")
	}
	ts, id, ok := strings.Cut(string(b), "__")
	t, terr := time.Parse(time.RFC3339Nano, ts)
	if !ok || terr != nil {
		return store.Cursor{}, errs.New(errs.InvalidArgument, "invalid nextToken")
	}
	return store.Cursor{StartedAt: t, ID: id}, nil
}
