package service

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/sandboxes"
	"github.com/covesandbox/cove/internal/template"
)

// maxLogEntries bounds the log kept in memory of one build: what the
// builder passes on of it (template.CapLog), and the entries that end it.
const maxLogEntries = template.MaxLogEntries + 16

// Builder runs template builds: the node's own (cove server), or one of
// the cluster's nodes (cove api).
type Builder interface {
	// Run runs a waiting build, passing its log to logf; the build's
	// record says how it ended.
	Run(ctx context.Context, templateID, buildID string, spec template.Spec, logf func(template.LogEntry)) error
	// CanBuild refuses early what the builder cannot build.
	CanBuild(spec template.Spec) error
}

// Templates is the template use cases: E2B's build API over the node's
// template store and builder.
type Templates struct {
	store      *template.Store
	builder    Builder                // nil: no builds here
	sharedLogs SharedLogs             // nil: the logs of the builds this process runs
	keptLogs   KeptLogs               // where those logs are kept past the build (nil: in memory for logKeep)
	inUse      func() map[string]bool // layers sandboxes stack
	secret     []byte
	log        *slog.Logger
	ctx        context.Context // ends builds when the server stops
	// recipes are the built-in recipes' versions (template.RecipeVersion),
	// by name: what a recipe's serving build must have been made from.
	recipes map[string]string
	// MaxTeamStorageMB, when above 0, is the layer storage a team's
	// templates may hold before its builds are refused; Quotas, when set,
	// gives each team's instead (Service.TeamQuota). Set before serving.
	MaxTeamStorageMB int64
	Quotas           func(ctx context.Context, team string) (sandboxes.TeamQuota, error)
	// VolumeBytes, when set, is what a team's volumes take: its storage
	// quota counts them beside its layers and uploads.
	VolumeBytes func(ctx context.Context, team string) (int64, error)

	// Holds, when set, keeps snapshots' storage holds where every API
	// replica counts them (a cluster's database; storage.go).
	Holds store.StorageHolds

	mu   sync.Mutex
	logs map[string]*buildLog // by build id
	// budgets are the storage budgets of teams with builds in progress
	// here: one per team, shared by its builds (storage.go).
	budgets map[string]*teamBudget
	wg      sync.WaitGroup
}

type buildLog struct {
	mu      sync.Mutex
	entries []template.LogEntry
	prog    *progress
	// said is the last tenth of the way the server's log was told of
	// (built-in templates only; -1: none).
	said   int
	report func(percent int, doing string)
	// cancel stops the build (a team's build run here; nil otherwise), and
	// done is closed once it ended.
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func newBuildLog(spec template.Spec, seconds []float64) *buildLog {
	return &buildLog{prog: newProgress(spec, seconds), said: -1}
}

func (bl *buildLog) add(e template.LogEntry) {
	bl.mu.Lock()
	if len(bl.entries) < maxLogEntries {
		bl.entries = append(bl.entries, e)
	}
	bl.mu.Unlock()
	bl.prog.add(e)
	bl.tell()
}

// tell reports to the server's log each tenth of the way.
func (bl *buildLog) tell() {
	if bl.report == nil {
		return
	}
	pct, doing := bl.prog.value()
	bl.mu.Lock()
	tell := pct/10 > bl.said
	if tell {
		bl.said = pct / 10
	}
	bl.mu.Unlock()
	if tell {
		bl.report(pct, doing)
	}
}

// NewTemplates returns the template service. ctx bounds the builds it runs.
func NewTemplates(ctx context.Context, st *template.Store, b Builder, inUse func() map[string]bool, secret []byte, log *slog.Logger) *Templates {
	recipes := map[string]string{}
	for name := range template.Recipes {
		recipes[name] = template.RecipeVersion(name)
	}
	return &Templates{store: st, builder: b, inUse: inUse, secret: secret, log: log, ctx: ctx, logs: map[string]*buildLog{}, recipes: recipes}
}

// Wait waits for the builds in progress (they end with the service's ctx).
func (t *Templates) Wait() { t.wg.Wait() }

// Visible reports whether team may see template id: its own, or a
// public one (nothing is prepared or built).
func (t *Templates) Visible(team, id string) bool {
	r, err := t.store.Get(team, id)
	return err == nil && (r.Team == team || r.Public)
}

// CanUse reports whether team may start sandboxes from ref. A built-in
// recipe not built yet starts building: the answer says so. One built from
// an older version of its recipe is rebuilt (refresh), and serves
// meanwhile.
func (t *Templates) CanUse(team, ref string) error {
	r, err := t.store.Get(team, ref)
	if err != nil {
		return err
	}
	if r.Team != team && !r.Public {
		return errs.New(errs.NotFound, "template '%s' not found", ref)
	}
	if _, ok := template.Recipes[r.ID]; !ok {
		return nil
	}
	if hasReady(r) {
		_ = t.refresh(r) // why it cannot be rebuilt here: PrepareBuiltins logs it
		return nil
	}
	st, err := t.Prepare(r.ID)
	if err != nil {
		return err
	}
	if st.Build.Status == template.StatusError {
		return errs.New(errs.Unavailable, "template %s failed to build: %s", r.ID, st.Build.Reason)
	}
	pct, doing, _ := t.Progress(st.Build.ID)
	return errs.WithHint(errs.New(errs.Unavailable, "template %s is being prepared (built once from Debian's archive, a few minutes): %d%% done, now %s; "+
		"follow it with `cove template prepare %s` or `cove template list`, then try again", r.ID, pct, doing, r.ID), errs.Hint{Code: errs.CodeTemplatePreparing})
}

// upToDate reports whether built-in recipe r serves a build of the
// recipe's current version.
func (t *Templates) upToDate(r template.Record) bool {
	b := r.Serving()
	return b != nil && b.Recipe == t.recipes[r.ID]
}

// tried reports whether a build of built-in recipe r's current version is
// under way or failed.
func (t *Templates) tried(r template.Record) bool {
	v := t.recipes[r.ID]
	for _, b := range r.Builds {
		if b.Recipe == v && b.Status != template.StatusReady {
			return true
		}
	}
	return false
}

// refresh rebuilds, in the background, a built-in recipe whose ready build
// is of an older version (a new version of Cove changed the recipe), once:
// after a failure, `cove template prepare` tries again. Its sandboxes start
// from the older build until the new one is ready. The error says why it
// cannot be rebuilt here.
func (t *Templates) refresh(r template.Record) error {
	if t.upToDate(r) || t.tried(r) {
		return nil
	}
	st, err := t.Prepare(r.ID) // says why it cannot build here
	if err != nil {
		return err
	}
	if st.Build.Recipe == t.recipes[r.ID] && st.Build.Unfinished() {
		t.log.Info("rebuilding a built-in template, whose recipe this version of Cove changed: its sandboxes start from its older build until then",
			"template", r.ID, "build", st.Build.ID)
	}
	return nil
}

func hasReady(r template.Record) bool {
	for _, b := range r.Builds {
		if b.Status == template.StatusReady {
			return true
		}
	}
	return false
}

// canBuild says at once why a built-in recipe cannot be built here: it, or
// a recipe it starts from that is not built yet, needs what the node
// lacks.
func (t *Templates) canBuild(name string) error {
	for at := name; at != ""; {
		spec := template.Recipes[at]
		if err := t.builder.CanBuild(spec); err != nil {
			if at != name {
				return errs.New(errs.KindOf(err), "template %s cannot be built here: %s, which it starts from: %v", name, at, err)
			}
			return errs.New(errs.KindOf(err), "template %s cannot be built here: %v", name, err)
		}
		if spec.FromTemplate == "" {
			return nil
		}
		if r, err := t.store.Get("", spec.FromTemplate); err == nil && t.upToDate(r) {
			return nil
		}
		at = spec.FromTemplate
	}
	return nil
}

// Prepare builds a built-in recipe (and the recipes it starts from) unless
// a build of its current version is ready or any build is under way, and
// returns that build, or the new one.
func (t *Templates) Prepare(name string) (BuildStatus, error) {
	if err := t.canBuildHere(); err != nil {
		return BuildStatus{}, err
	}
	spec, ok := template.Recipes[name]
	if !ok {
		return BuildStatus{}, errs.New(errs.NotFound, "%s is not a built-in template (those are %v)", name, template.RecipeOrder)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, err := t.store.Get("", name)
	if err != nil {
		return BuildStatus{}, err
	}
	if t.upToDate(r) {
		return BuildStatus{Build: *r.Serving()}, nil
	}
	if n := len(r.Builds); n > 0 && r.Builds[n-1].Unfinished() {
		return BuildStatus{Build: *r.Builds[n-1]}, nil
	}
	if err := t.canBuild(name); err != nil {
		return BuildStatus{}, err
	}
	cpus, mem := cmp.Or(spec.CPUCount, 2), cmp.Or(spec.MemoryMB, 1024)
	b, started, err := t.store.NewRecipeBuild(name, cpus, mem)
	if err != nil {
		return BuildStatus{}, err
	}
	if !started { // a cluster's other replica's, just started
		return BuildStatus{Build: *b}, nil
	}
	b.Recipe = t.recipes[name]
	if err := t.store.SetBuild(name, *b); err != nil {
		return BuildStatus{}, err
	}
	bl := newBuildLog(spec, template.RecipeSeconds[name])
	bl.report = func(pct int, doing string) {
		t.log.Info("preparing a built-in template", "template", name, "percent", pct, "doing", doing)
	}
	t.logs[b.ID] = bl
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if spec.FromTemplate != "" {
			if err := t.awaitRecipe(spec.FromTemplate, bl, template.RecipeShare(spec.FromTemplate, name)); err != nil {
				failed := *b
				failed.Status, failed.Reason, failed.FinishedAt = template.StatusError, err.Error(), time.Now().UTC()
				logf, closeLog := t.logTo(b.ID, bl)
				logf(template.LogEntry{Time: time.Now(), Level: "error", Message: "build failed: " + err.Error(), Final: true})
				closeLog()
				if err := t.store.SetBuild(name, failed); err != nil {
					t.log.Error("record failed build", "template", name, logx.Err(err))
				}
				return
			}
		}
		t.run(t.ctx, name, b.ID, spec, bl)
	}()
	return BuildStatus{Build: *b}, nil
}

// PrepareBuiltins starts building template.PreparedAhead and the recipes
// it starts from, unless built, where this node can build them; where it
// cannot, the log says why and they wait for a first use.
func (t *Templates) PrepareBuiltins() {
	last := template.PreparedAhead
	if r, err := t.store.Get("", last); err == nil && hasReady(r) {
		if err := t.refresh(r); err != nil {
			t.log.Info("a built-in template whose recipe this version of Cove changed is not rebuilt: its sandboxes start from its older build",
				"template", last, "reason", err.Error())
		}
		return
	}
	if err := t.canBuild(last); err != nil {
		t.log.Info("the built-in templates are not prepared in the background", "reason", err.Error())
		return
	}
	if _, err := t.Prepare(last); err != nil {
		t.log.Warn("prepare the built-in templates", logx.Err(err))
		return
	}
	t.log.Info("preparing the built-in templates in the background (a few minutes): cove template list shows how far", "template", last)
}

// awaitRecipe prepares a recipe another one starts from (once) and waits
// for that build to end. Meanwhile the build that waits, whose log is bl,
// tells that recipe's progress as its own, and its log carries that
// recipe's lines.
func (t *Templates) awaitRecipe(name string, bl *buildLog, share float64) error {
	st, err := t.Prepare(name)
	if err != nil {
		return err
	}
	if st.Build.Status != template.StatusReady {
		t.mu.Lock()
		parent := t.logs[st.Build.ID]
		t.mu.Unlock()
		if parent != nil {
			bl.prog.waitFor(name, parent.prog, share)
			defer bl.prog.parentDone()
			stop := t.forwardLog(parent, bl, name)
			defer stop()
		}
	}
	for {
		r, err := t.store.Get("", name)
		if err != nil {
			return err
		}
		b := r.Build(st.Build.ID)
		if b == nil {
			return errs.New(errs.Internal, "build %s of %s vanished", st.Build.ID, name)
		}
		switch b.Status {
		case template.StatusReady:
			return nil
		case template.StatusError:
			return errs.New(errs.Unavailable, "template %s, which this one starts from, failed: %s", name, b.Reason)
		}
		select {
		case <-t.ctx.Done():
			return t.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// BuildSize is a build's sandbox size (zero: 2 CPUs, 1024 MiB) and how
// large its sandboxes may ask to be (zero: that size).
type BuildSize struct {
	CPUCount, MemoryMB       int
	MaxCPUCount, MaxMemoryMB int
}

// NewBuild makes (or reuses, by name) a team's template and a build of it
// waiting for its steps. name may carry a tag ("name:tag").
func (t *Templates) NewBuild(ctx context.Context, team, name string, tags []string, size BuildSize, isolation string) (template.Record, *template.Build, error) {
	if err := t.canBuildHere(); err != nil {
		return template.Record{}, nil, err
	}
	switch isolation {
	case "", "namespaces", "gvisor", "microvm":
	default:
		return template.Record{}, nil, errs.New(errs.InvalidArgument, "isolation %q: want namespaces, gvisor or microvm", isolation)
	}
	cpu, memoryMB := cmp.Or(size.CPUCount, 2), cmp.Or(size.MemoryMB, 1024)
	if cpu < 1 || cpu > 64 || memoryMB < 128 || memoryMB > 65536 {
		return template.Record{}, nil, errs.New(errs.InvalidArgument, "cpuCount must be 1 to 64 and memoryMB 128 to 65536")
	}
	if size.MaxCPUCount != 0 && (size.MaxCPUCount < cpu || size.MaxCPUCount > 64) {
		return template.Record{}, nil, errs.New(errs.InvalidArgument, "maxCpuCount must be from cpuCount (%d) to 64", cpu)
	}
	if size.MaxMemoryMB != 0 && (size.MaxMemoryMB < memoryMB || size.MaxMemoryMB > 65536) {
		return template.Record{}, nil, errs.New(errs.InvalidArgument, "maxMemoryMB must be from memoryMB (%d) to 65536", memoryMB)
	}
	base, tag, hasTag := cutTag(name)
	if hasTag {
		tags = append([]string{tag}, tags...)
	}
	before, _ := t.store.Get(team, base)
	rec, b, err := t.store.NewBuild(team, base, tags, cpu, memoryMB)
	if err == nil { // the builds the new one pushed out take their logs along
		now := buildIDs(rec)
		t.dropLogs(ctx, rec.ID, slices.DeleteFunc(buildIDs(before), func(id string) bool { return slices.Contains(now, id) }))
	}
	if err != nil || isolation == "" && size.MaxCPUCount == 0 && size.MaxMemoryMB == 0 {
		return rec, b, err
	}
	b.Isolation, b.MaxCPUCount, b.MaxMemoryMB = isolation, size.MaxCPUCount, size.MaxMemoryMB
	return rec, b, t.store.SetBuild(rec.ID, *b)
}

func cutTag(name string) (string, string, bool) {
	for i := len(name) - 1; i >= 0 && name[i] != '/'; i-- {
		if name[i] == ':' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// owned returns a team's template.
func (t *Templates) owned(team, ref string) (template.Record, error) {
	r, err := t.store.Get(team, ref)
	if err != nil {
		return r, err
	}
	if r.Team != team {
		return r, errs.New(errs.NotFound, "template '%s' not found", ref)
	}
	return r, nil
}

// StartBuild runs a waiting build in the background.
func (t *Templates) StartBuild(ctx context.Context, team, templateID, buildID string, spec template.Spec) error {
	if err := t.canBuildHere(); err != nil {
		return err
	}
	if len(spec.Steps) > MaxBuildSteps {
		return errs.New(errs.InvalidArgument, "a build has %d steps, at most %d are allowed", len(spec.Steps), MaxBuildSteps)
	}
	r, err := t.owned(team, templateID)
	if err != nil {
		return err
	}
	b := r.Build(buildID)
	if b == nil {
		return errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
	}
	if b.Status != template.StatusWaiting {
		return errs.New(errs.Conflict, "build %s is %s, not waiting", buildID, b.Status)
	}
	t.fromTemplate(team, &spec)
	if spec.FromTemplate != "" { // another team's template is not a base for this one
		if err := t.CanUse(team, spec.FromTemplate); err != nil {
			return err
		}
	}
	release, err := t.reserveStorage(ctx, team, &spec)
	if err != nil {
		return err
	}
	if spec.Steps, err = t.filesDigests(ctx, team, spec.Steps); err != nil {
		release()
		return err
	}
	bl := newBuildLog(spec, nil)
	buildCtx, cancel := context.WithCancelCause(t.ctx)
	bl.cancel, bl.done = cancel, make(chan struct{})
	t.mu.Lock()
	if _, ok := t.logs[buildID]; ok {
		t.mu.Unlock()
		cancel(nil)
		release()
		return errs.New(errs.Conflict, "build %s was started already", buildID)
	}
	if n := t.teamBuildsLocked(team); n >= MaxTeamBuilds {
		t.mu.Unlock()
		cancel(nil)
		release()
		return errs.New(errs.QuotaExceeded, "team quota: the team has %d builds in progress, at most %d at once; wait for one to end or cancel one (cove template cancel)", n, MaxTeamBuilds)
	}
	t.logs[buildID] = bl
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer release()
		defer close(bl.done)
		defer cancel(nil)
		t.run(buildCtx, templateID, buildID, spec, bl)
	}()
	return nil
}

// canBuildHere refuses builds where there is no builder: an API replica
// of a cluster without an object store to share what its nodes build.
func (t *Templates) canBuildHere() error {
	if t.builder == nil {
		return errs.New(errs.Unimplemented, "template builds in a cluster need an object store for its nodes to share them (cove api and cove node --object-store)")
	}
	return nil
}

// run runs a build, keeping its log; ctx ends it.
func (t *Templates) run(ctx context.Context, templateID, buildID string, spec template.Spec, bl *buildLog) {
	logf, closeLog := t.logTo(buildID, bl)
	stopWatch := t.watchCancel(ctx, templateID, buildID, bl)
	err := t.builder.Run(ctx, templateID, buildID, spec, logf)
	stopWatch()
	if errors.Is(context.Cause(ctx), errBuildCancelled) {
		t.recordCancelled(templateID, buildID, logf)
		t.log.Info("template build cancelled", "template", templateID, "build", buildID)
	} else if err != nil {
		t.failUnfinished(templateID, buildID, err, logf)
		t.log.Info("template build failed", "template", templateID, "build", buildID, logx.Err(err))
	} else {
		t.log.Info("template built", "template", templateID, "build", buildID)
	}
	closeLog()
	// The log stays in memory for clients still following it, then goes
	// (kept in KeptLogs, when set).
	time.AfterFunc(logKeep, func() {
		t.mu.Lock()
		delete(t.logs, buildID)
		t.mu.Unlock()
	})
	t.collect()
}

// failUnfinished records as failed a build whose builder failed before it
// could (a cluster's node that was lost, or never reached).
func (t *Templates) failUnfinished(templateID, buildID string, cause error, logf func(template.LogEntry)) {
	r, err := t.store.Get("", templateID)
	if err != nil {
		return
	}
	b := r.Build(buildID)
	if b == nil || !b.Unfinished() {
		return
	}
	b.Status, b.Reason, b.FinishedAt = template.StatusError, cause.Error(), time.Now().UTC()
	logf(template.LogEntry{Time: time.Now(), Level: "error", Message: "build failed: " + cause.Error(), Final: true})
	if err := t.store.SetBuild(templateID, *b); err != nil {
		t.log.Error("record a failed build", "template", templateID, "build", buildID, logx.Err(err))
	}
}

// logTo is where the entries of a build's log run here go: its log in
// memory, and KeptLogs when set; closeLog stores what is pending.
func (t *Templates) logTo(buildID string, bl *buildLog) (logf func(template.LogEntry), closeLog func()) {
	if t.keptLogs == nil {
		return bl.add, func() {}
	}
	if err := t.keptLogs.PruneBuildLogs(t.ctx, template.LogKeep); err != nil { // as a node does at each build
		t.log.Warn("prune old build logs", logx.Err(err))
	}
	sink := template.NewLogSink(t.keptLogs, buildID, t.log)
	return func(e template.LogEntry) { bl.add(e); sink.Add(e) }, sink.Close
}

// logKeep is how long a finished build's log is kept in memory.
const logKeep = time.Hour

// forwardLog copies the lines of from, a recipe's build, into to, each
// after "name: ", until stop is called: a client following a build that
// waits for it sees its progress.
func (t *Templates) forwardLog(from, to *buildLog, name string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		next := 0
		for {
			from.mu.Lock()
			lines := slices.Clone(from.entries[next:])
			from.mu.Unlock()
			next += len(lines)
			to.mu.Lock()
			for _, e := range lines {
				if len(to.entries) < maxLogEntries {
					e.Message, e.Step, e.Final = name+": "+e.Message, "", false
					to.entries = append(to.entries, e)
				}
			}
			to.mu.Unlock()
			to.tell()
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Progress is how far an unfinished build run here has come, in percent,
// and what it does now; ok is false for a build this process does not run.
func (t *Templates) Progress(buildID string) (percent int, doing string, ok bool) {
	t.mu.Lock()
	bl := t.logs[buildID]
	t.mu.Unlock()
	if bl == nil {
		return 0, "", false
	}
	percent, doing = bl.prog.value()
	return percent, doing, true
}

// BuildStatus is a build's state and its log from an offset on.
type BuildStatus struct {
	Build template.Build
	Logs  []template.LogEntry
}

// SharedLogs are builds' logs that the nodes running them keep where any
// API replica reads them (the cluster's database).
type SharedLogs interface {
	BuildLog(ctx context.Context, buildID string, p template.LogPage) ([]template.LogEntry, error)
	// BuildLogBytes is what builds' logs hold: charged to their team's
	// storage.
	BuildLogBytes(ctx context.Context, buildIDs []string) (int64, error)
	// DeleteBuildLogs removes builds' logs (their template was deleted).
	DeleteBuildLogs(ctx context.Context, buildIDs []string) error
}

// UseSharedLogs makes Status read builds' logs from logs (an API replica
// of a cluster, whichever replica started the build). Call it before
// serving.
func (t *Templates) UseSharedLogs(logs SharedLogs) { t.sharedLogs = logs }

// KeptLogs keep the logs of the builds a single server runs past them and
// its restarts (its database).
type KeptLogs interface {
	SharedLogs
	template.LogStore
}

// KeepLogs makes the builds this process runs keep their logs in logs,
// where Status reads them once they are no longer in memory; logs older
// than template.LogKeep go as each build starts. Call it before serving.
func (t *Templates) KeepLogs(logs KeptLogs) { t.keptLogs = logs }

// Status returns a build's state with the page of its log p selects.
func (t *Templates) Status(ctx context.Context, team, templateID, buildID string, p template.LogPage) (BuildStatus, error) {
	r, err := t.Get(team, templateID)
	if err != nil {
		return BuildStatus{}, err
	}
	b := r.Build(buildID)
	if b == nil {
		return BuildStatus{}, errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
	}
	out := BuildStatus{Build: *b}
	p.Offset = max(p.Offset, 0)
	if t.sharedLogs != nil {
		if out.Logs, err = t.sharedLogs.BuildLog(ctx, buildID, p); err != nil {
			return BuildStatus{}, err
		}
		return out, nil
	}
	t.mu.Lock()
	bl := t.logs[buildID]
	t.mu.Unlock()
	switch {
	case bl != nil:
		bl.mu.Lock()
		out.Logs = page(bl.entries, p)
		bl.mu.Unlock()
	case t.keptLogs != nil:
		if out.Logs, err = t.keptLogs.BuildLog(ctx, buildID, p); err != nil {
			return BuildStatus{}, err
		}
	}
	return out, nil
}

// page is the page p selects of entries, copied.
func page(entries []template.LogEntry, p template.LogPage) []template.LogEntry {
	var out []template.LogEntry
	skip := p.Offset
	if p.Levels == nil {
		entries, skip = entries[min(skip, len(entries)):], 0
	}
	for _, e := range entries {
		if p.Levels != nil && !slices.Contains(p.Levels, e.Level) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		out = append(out, e)
	}
	return out
}

// List returns the templates a team sees.
func (t *Templates) List(team string) []template.Record { return t.store.List(team) }

// Delete removes a team's template and its builds' logs; its layers go
// once no sandbox uses them.
func (t *Templates) Delete(ctx context.Context, team, ref string) error {
	r, err := t.store.Get(team, ref) // the store's Delete says who may
	if err != nil {
		return err
	}
	if err := t.store.Delete(team, ref); err != nil {
		return err
	}
	t.dropLogs(ctx, r.ID, buildIDs(r))
	t.collect()
	return nil
}

// dropLogs removes the logs of a template's builds that went (the
// template was deleted, or a new build pushed its oldest out), from
// memory and the database.
func (t *Templates) dropLogs(ctx context.Context, templateID string, ids []string) {
	if len(ids) == 0 {
		return
	}
	t.mu.Lock()
	for _, id := range ids {
		delete(t.logs, id)
	}
	t.mu.Unlock()
	if logs := t.logStore(); logs != nil {
		if err := logs.DeleteBuildLogs(ctx, ids); err != nil {
			// Uncharged from here on; the age prune removes them.
			t.log.Error("delete the logs of builds that went", "template", templateID, logx.Err(err))
		}
	}
}

// logStore is the database that keeps builds' logs (nil: none).
func (t *Templates) logStore() SharedLogs {
	if t.sharedLogs != nil {
		return t.sharedLogs
	}
	if t.keptLogs != nil {
		return t.keptLogs
	}
	return nil
}

func buildIDs(r template.Record) []string {
	ids := make([]string, 0, len(r.Builds))
	for _, b := range r.Builds {
		ids = append(ids, b.ID)
	}
	return ids
}

// Tag points tags at the build target ("name:tag") names.
func (t *Templates) Tag(team, target string, tags []string) (string, error) {
	return t.store.Tag(team, target, tags)
}

// Untag removes tags of a team's template.
func (t *Templates) Untag(team, name string, tags []string) error {
	return t.store.Untag(team, name, tags)
}

// Get returns a template the team may see (its own or a public one).
func (t *Templates) Get(team, ref string) (template.Record, error) {
	r, err := t.store.Get(team, ref)
	if err == nil && r.Team != team && !r.Public {
		err = errs.New(errs.NotFound, "template '%s' not found", ref)
	}
	return r, err
}

// SandboxEnded lets the layers of deleted templates go once their last
// sandbox ended.
func (t *Templates) SandboxEnded() { t.collect() }

func (t *Templates) collect() { t.store.Tidy(t.inUse) }

// LogTime formats a log entry's time as E2B does.
func LogTime(e template.LogEntry) string { return e.Time.UTC().Format(time.RFC3339Nano) }
