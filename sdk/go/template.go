package cove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// TemplateStep is one build step: RUN [cmd, user?], COPY [src, dest,
// user?, mode?], ENV [k1, v1, …], WORKDIR [path], USER [name].
type TemplateStep struct {
	Type string   `json:"type"`
	Args []string `json:"args"`
	// FilesHash names the archive of a COPY step's files; Files holds it
	// (a tar, uploaded when the server lacks it).
	FilesHash string `json:"filesHash,omitempty"`
	Files     []byte `json:"-"`
	Force     bool   `json:"force,omitempty"`
}

// TemplateBuild describes a template to build.
type TemplateBuild struct {
	Name     string // "name" or "name:tag"
	Tags     []string
	CPUCount int // 0 = 2
	MemoryMB int // 0 = 1024
	// MaxCPUCount and MaxMemoryMB make the template resizable: a create
	// may ask for up to these (CreateOptions.CPUCount, MemoryMB); 0: the
	// template's own size.
	MaxCPUCount int
	MaxMemoryMB int
	// FromImage (a registry reference, or oci:DIR / docker-archive:FILE on
	// the server when it allows local images) or FromTemplate; neither
	// means the built-in base template.
	FromImage    string
	FromTemplate string
	Steps        []TemplateStep
	StartCmd     string // run in the background as each sandbox starts
	ReadyCmd     string // the sandbox is ready once this exits 0
	Force        bool   // rebuild every step, cached or not
	// Isolation is the driver the template's sandboxes run on when they
	// ask for none: "namespaces", "gvisor" or "microvm" ("" = the server's default).
	Isolation string
}

// BuildLog is a line of a build's log.
type BuildLog struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// BuiltTemplate is a finished build.
type BuiltTemplate struct {
	TemplateID string
	BuildID    string
}

// BuildError is a build that failed: its reason and the step (from 1;
// "" outside the steps).
type BuildError struct {
	Message string
	Step    string
}

func (e *BuildError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("build failed at step %s: %s", e.Step, e.Message)
	}
	return "build failed: " + e.Message
}

// BuildTemplate builds a template through the E2B build API: it requests
// the build, uploads the files of COPY steps the server lacks, starts the
// build and follows it, passing log lines to onLog (may be nil), until it
// is ready or fails (*BuildError).
func (c *Client) BuildTemplate(ctx context.Context, b TemplateBuild, onLog func(BuildLog)) (BuiltTemplate, error) {
	var created struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
	}
	req := map[string]any{"name": b.Name, "tags": b.Tags, "cpuCount": b.CPUCount, "memoryMB": b.MemoryMB, "isolation": b.Isolation}
	if b.MaxCPUCount > 0 {
		req["maxCpuCount"] = b.MaxCPUCount
	}
	if b.MaxMemoryMB > 0 {
		req["maxMemoryMB"] = b.MaxMemoryMB
	}
	if _, err := c.do(ctx, http.MethodPost, "/v3/templates", req, &created); err != nil {
		return BuiltTemplate{}, err
	}
	out := BuiltTemplate{TemplateID: created.TemplateID, BuildID: created.BuildID}
	for _, s := range b.Steps {
		if s.FilesHash == "" || s.Files == nil {
			continue
		}
		if err := c.uploadFiles(ctx, out.TemplateID, s.FilesHash, s.Files, s.Force); err != nil {
			return out, err
		}
	}
	start := map[string]any{"steps": b.Steps, "startCmd": b.StartCmd, "readyCmd": b.ReadyCmd, "force": b.Force}
	if b.FromImage != "" {
		start["fromImage"] = b.FromImage
	}
	if b.FromTemplate != "" {
		start["fromTemplate"] = b.FromTemplate
	}
	path := "/v2/templates/" + url.PathEscape(out.TemplateID) + "/builds/" + url.PathEscape(out.BuildID)
	if _, err := c.do(ctx, http.MethodPost, path, start, nil); err != nil {
		return out, err
	}
	return out, c.waitBuild(ctx, out, onLog)
}

func (c *Client) uploadFiles(ctx context.Context, templateID, hash string, data []byte, force bool) error {
	var link struct {
		Present bool   `json:"present"`
		URL     string `json:"url"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/templates/"+url.PathEscape(templateID)+"/files/"+hash, nil, &link); err != nil {
		return err
	}
	if link.Present && !force || link.URL == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, link.URL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(data))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("upload files: %w", transportErr(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return apiError(resp)
	}
	return nil
}

// PrepareTemplate builds one of the server's built-in templates that are
// built on first use (debian, code-interpreter-v1) unless it is built, and
// follows the build to its end, passing log lines to onLog (may be nil).
func (c *Client) PrepareTemplate(ctx context.Context, name string, onLog func(BuildLog)) error {
	var st struct {
		TemplateID string `json:"templateID"`
		BuildID    string `json:"buildID"`
		Status     string `json:"status"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/templates/"+url.PathEscape(name)+"/prepare", nil, &st); err != nil {
		return err
	}
	return c.waitBuild(ctx, BuiltTemplate{TemplateID: st.TemplateID, BuildID: st.BuildID}, onLog)
}

// waitBuild polls a build's status until it ends, passing its log on.
func (c *Client) waitBuild(ctx context.Context, b BuiltTemplate, onLog func(BuildLog)) error {
	offset := 0
	for {
		var st struct {
			Status     string     `json:"status"`
			LogEntries []BuildLog `json:"logEntries"`
			Reason     *struct {
				Message string `json:"message"`
				Step    string `json:"step"`
			} `json:"reason"`
		}
		path := "/templates/" + url.PathEscape(b.TemplateID) + "/builds/" + url.PathEscape(b.BuildID) + "/status?logsOffset=" + strconv.Itoa(offset)
		if _, err := c.do(ctx, http.MethodGet, path, nil, &st); err != nil {
			return err
		}
		offset += len(st.LogEntries)
		if onLog != nil {
			for _, e := range st.LogEntries {
				onLog(e)
			}
		}
		switch st.Status {
		case "ready":
			if len(st.LogEntries) == 0 {
				return nil
			}
			continue // drain the log's tail
		case "error":
			if len(st.LogEntries) > 0 {
				continue
			}
			e := &BuildError{Message: "unknown error"}
			if st.Reason != nil {
				e.Message, e.Step = st.Reason.Message, st.Reason.Step
			}
			return e
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CancelBuild stops a build in progress of one of the team's templates
// (Cove's own call: E2B's API has none). Its processes and build
// sandboxes go, what it wrote is removed, and it ends as failed: a
// BuildTemplate following it returns a *BuildError whose message says it
// was cancelled. It returns the build's status then: "error", or
// "building" while it still ends (after a minute). A build that has ended
// already is ErrConflict.
func (c *Client) CancelBuild(ctx context.Context, templateID, buildID string) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	path := "/templates/" + url.PathEscape(templateID) + "/builds/" + url.PathEscape(buildID) + "/cancel"
	if _, err := c.do(ctx, http.MethodPost, path, nil, &st); err != nil {
		return "", err
	}
	return st.Status, nil
}

// TemplateInfo describes a template.
type TemplateInfo struct {
	TemplateID  string            `json:"templateID"`
	BuildID     string            `json:"buildID"`
	Names       []string          `json:"names"`
	Public      bool              `json:"public"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	BuildCount  int               `json:"buildCount"`
	BuildStatus string            `json:"buildStatus"`
	CreatedAt   time.Time         `json:"createdAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	Tags        map[string]string `json:"tags"`
	// WarmError is why the server cannot keep sandboxes of the template
	// warm ("" when it can).
	WarmError string `json:"warmError,omitempty"`
	// BuildProgress and BuildDoing, while its newest build runs, are how
	// far it is (percent, an estimate; nil when the server cannot tell)
	// and what it does now.
	BuildProgress *int   `json:"buildProgress,omitempty"`
	BuildDoing    string `json:"buildDoing,omitempty"`
	// ServingBuildID is the build its sandboxes start from ("" while
	// none is ready): an older one while a newer builds, or failed.
	ServingBuildID string `json:"servingBuildID,omitempty"`
}

// Status is the template's state in a word or three: its newest build's
// (E2B's buildStatus: building, waiting, ready, error), or "ready
// (rebuilding)" and "ready (rebuild failed)" while an older build serves.
func (t TemplateInfo) Status() string {
	if t.ServingBuildID == "" || t.ServingBuildID == t.BuildID {
		return t.BuildStatus
	}
	switch t.BuildStatus {
	case "building", "waiting":
		return "ready (rebuilding)"
	case "error":
		return "ready (rebuild failed)"
	}
	return t.BuildStatus
}

// ListTemplates lists the templates the key's team can use.
func (c *Client) ListTemplates(ctx context.Context) ([]TemplateInfo, error) {
	var out []TemplateInfo
	_, err := c.do(ctx, http.MethodGet, "/templates", nil, &out)
	return out, err
}

// DeleteTemplate deletes a template (by id or name); sandboxes running
// from it go on.
func (c *Client) DeleteTemplate(ctx context.Context, ref string) error {
	_, err := c.do(ctx, http.MethodDelete, "/templates/"+url.PathEscape(ref), nil, nil)
	return err
}

// TemplateExists reports whether a template name is taken (by any team).
func (c *Client) TemplateExists(ctx context.Context, name string) (bool, error) {
	_, err := c.do(ctx, http.MethodGet, "/templates/aliases/"+url.PathEscape(name), nil, nil)
	var apiErr *APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}
