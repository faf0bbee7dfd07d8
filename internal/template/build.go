package template

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/network"
)

// Step is one build step, as E2B's build API sends it: RUN [cmd, user?],
// COPY [src, dest, user?, mode?] with the hash of the uploaded files (the
// client's; the service gives the builder the SHA-256 of the archive the
// team uploaded for it instead), ENV
// [k1, v1, …], WORKDIR [path], USER [name].
type Step struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	FilesHash string   `json:"filesHash,omitempty"`
	Force     bool     `json:"force,omitempty"`
}

// Spec is what to build: a start (an image, or another template; neither
// means base), steps, and the start and ready commands.
type Spec struct {
	FromImage    string
	FromTemplate string
	// FromDebootstrap makes the base with debootstrap on the node (the
	// built-in recipes).
	FromDebootstrap *Debootstrap
	Steps           []Step
	StartCmd        string
	ReadyCmd        string
	// CPUCount and MemoryMB size a recipe's sandboxes (0: 2 CPUs, 1 GiB).
	CPUCount, MemoryMB int
	// Force rebuilds every step, cache or not.
	Force bool
	// DebCache gives the steps and debootstrap the node's cache of Debian
	// packages (debcache.go): the built-in recipes only. A user's request
	// never sets it (the API builds a Spec field by field); it travels as
	// JSON to a cluster's node, as FromDebootstrap does.
	DebCache bool `json:"debCache,omitempty"`
	// StorageBytes, when above 0, is what the build's new layers may
	// hold (the team's storage left); Budget, when set, is the budget
	// itself, shared with the team's other builds on this node.
	StorageBytes int64          `json:"storageBytes,omitempty"`
	Budget       *fsutil.Budget `json:"-"`
}

// budget is what a build may write: StorageBytes, and its shared Budget,
// keeping the node's floor of free disk.
func (s Spec) budget(dir string) *fsutil.Budget {
	return &fsutil.Budget{Max: s.StorageBytes, Dir: dir, What: "the team's storage", Parent: s.Budget}
}

// LogEntry is a line of a build's log.
type LogEntry struct {
	Time    time.Time
	Level   string // debug, info, warn, error
	Message string
	Step    string // "" outside steps, else the step's number from 1
	// Final marks the entry that ends a build's log: the build's record
	// says how it ended right after it.
	Final bool
}

// Exec is a command a build runs inside its sandbox.
type Exec struct {
	Cmd        string
	User       string
	Workdir    string
	Env        map[string]string
	Background bool // return once started
}

// BuildSandbox is a running build sandbox.
type BuildSandbox interface {
	// Exec runs cmd with /bin/sh -c, passing each line of output to out,
	// and returns its exit code.
	Exec(ctx context.Context, cmd Exec, out func(line string)) (int, error)
	// Close destroys the sandbox.
	Close() error
}

// Sandboxes start build sandboxes: the same isolation as any sandbox, over
// t's layers, with t.RootFS.Upper (when set) as the writable layer.
type Sandboxes interface {
	StartBuild(ctx context.Context, t Template) (BuildSandbox, error)
}

// Builder runs builds.
type Builder struct {
	store     *Store
	sandboxes Sandboxes
	log       *slog.Logger
	// AllowLocalImages lets builds read images from the node's disk
	// (oci:, docker-archive:).
	AllowLocalImages bool
	// Registries is the address policy of image pulls: registries, their
	// token realms and redirects (nil: addrpolicy's defaults, the default
	// sandbox range refused, no range allowed).
	Registries *addrpolicy.Policy
	// ReadyTimeout bounds the wait for a ready command.
	ReadyTimeout time.Duration
	// Debootstrap is the debootstrap program ("" = from PATH).
	Debootstrap string
	// Mirror is the Debian archive the recipes are made from ("" = the
	// first one the host's apt sources name); their build steps' apt-get
	// uses it too.
	Mirror string
	// HostCerts is the node's directory of trusted certificates
	// (/etc/ssl/certs), which the recipes' build steps see read-only at
	// hostCertsTarget: a recipe that fetches over TLS (pip from PyPI)
	// trusts what the node trusts, a proxy's CA among them. "" = none.
	HostCerts string
	// Observe, when set, is told how each build ended (StatusReady,
	// StatusError) and how long it ran.
	Observe func(status string, d time.Duration)
}

// registries is the builder's address policy of image pulls.
func (b *Builder) registries() *addrpolicy.Policy {
	if b.Registries != nil {
		return b.Registries
	}
	return addrpolicy.New(addrpolicy.Config{Flag: "--registry-allow",
		Never: func() []netip.Prefix { return []netip.Prefix{network.DefaultRange} }})
}

// NewBuilder returns a builder over the store's layers.
func NewBuilder(store *Store, sandboxes Sandboxes, log *slog.Logger) *Builder {
	return &Builder{store: store, sandboxes: sandboxes, log: log, ReadyTimeout: 10 * time.Minute, HostCerts: "/etc/ssl/certs"}
}

// state is a build between steps: its image so far and the cache key of
// everything that made it.
type state struct {
	Image
	Key string `json:"key"`
}

// StepError is a failed step.
type StepError struct {
	Step int // from 1; 0 = outside the steps
	Err  error
}

func (e *StepError) Error() string {
	if e.Step == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("step %d: %v", e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Run builds spec into the build buildID of template templateID, which
// NewBuild made, and records the outcome. Progress and step output go to
// logf: what the base and the steps print within the bounds of a build's
// log (CapLog), and the builder's own lines (each step as it starts, the
// end) always, made clean (CleanLine). A build whose ctx ends fails with
// ctx's cause (a cancel says why).
func (b *Builder) Run(ctx context.Context, templateID, buildID string, spec Spec, logf func(LogEntry)) error {
	output, out := CapLog(logf), logf
	logf = func(e LogEntry) {
		e.Message = CleanLine(e.Message)
		out(e)
	}
	b.store.building.RLock()
	defer b.store.building.RUnlock()
	rec, err := b.store.Get("", templateID)
	if err != nil {
		return err
	}
	build := rec.Build(buildID)
	if build == nil {
		return errs.New(errs.NotFound, "build %s of template %s not found", buildID, templateID)
	}
	if !build.Unfinished() { // cancelled before it ran
		return errs.New(errs.Conflict, "build %s of template %s has ended (%s): %s", buildID, templateID, build.Status, build.Reason)
	}
	build.Status, build.Node = StatusBuilding, b.store.node
	if err := b.store.SetBuild(templateID, *build); err != nil {
		return err
	}
	began := time.Now()
	img, err := b.build(ctx, rec.Team, *build, spec, logf, output)
	if err == nil && b.store.remote != nil {
		logf(LogEntry{Time: time.Now(), Level: "info", Message: "pushing the layers to the object store"})
		img.Blobs, err = b.store.PushLayers(ctx, img.Layers)
	}
	build.FinishedAt = time.Now().UTC()
	if err != nil && ctx.Err() != nil {
		err = b.ended(ctx, templateID, buildID)
	}
	if err != nil {
		build.Status, build.Reason = StatusError, err.Error()
		var se *StepError
		if errors.As(err, &se) && se.Step > 0 {
			build.ReasonStep = strconv.Itoa(se.Step)
		}
		logf(LogEntry{Time: time.Now(), Level: "error", Message: "build failed: " + err.Error(), Step: build.ReasonStep, Final: true})
	} else {
		build.Status, build.Image = StatusReady, img
		logf(LogEntry{Time: time.Now(), Level: "info", Message: "build ready", Final: true})
	}
	if b.Observe != nil {
		b.Observe(build.Status, time.Since(began))
	}
	if serr := b.store.SetBuild(templateID, *build); serr != nil {
		return serr
	}
	return err
}

// CancelledReason is why a build its team cancelled failed.
const CancelledReason = "cancelled: the team cancelled the build"

// ended is why a build whose ctx ended stopped: its team cancelled it
// (its record says so, asked or recorded already: the cancel may have
// reached another process of a cluster, whose call to this node ended),
// else ctx's cause.
func (b *Builder) ended(ctx context.Context, templateID, buildID string) error {
	if r, err := b.store.Get("", templateID); err == nil {
		if cur := r.Build(buildID); cur != nil && (cur.CancelRequested || cur.Reason == CancelledReason) {
			return errs.New(errs.Canceled, CancelledReason)
		}
	}
	return context.Cause(ctx)
}

// build runs the steps: its own lines go to logf, what the base and the
// steps print to output.
func (b *Builder) build(ctx context.Context, team string, build Build, spec Spec, logf, output func(LogEntry)) (Image, error) {
	entry := func(step int, msg string) LogEntry {
		s := ""
		if step > 0 {
			s = strconv.Itoa(step)
		}
		return LogEntry{Time: time.Now(), Level: "info", Message: msg, Step: s}
	}
	say := func(step int, msg string) { logf(entry(step, msg)) }
	stepOut := func(step int) func(string) { return func(line string) { output(entry(step, line)) } }
	budget := spec.budget(b.store.dir)
	st, parent, err := b.start(ctx, team, spec, budget, stepOut(0))
	if err != nil {
		return Image{}, &StepError{Err: err}
	}
	for i, step := range spec.Steps {
		n := i + 1
		st.Key = stepKey(st.Key, step)
		if !spec.Force && !step.Force {
			if cached, ok := b.cached(st.Key); ok {
				say(n, "CACHED "+describe(step))
				st = cached
				continue
			}
		}
		say(n, describe(step))
		next, err := b.runStep(ctx, st, step, build, spec.DebCache, budget, stepOut(n))
		if err == nil {
			err = b.charge(budget, next.Layers[len(st.Layers):])
		}
		if err != nil {
			return Image{}, &StepError{Step: n, Err: err}
		}
		st = next
		b.remember(st)
	}
	st.StartCmd, st.ReadyCmd = startCommands(spec, parent)
	switch {
	case parent.StartCmd == "":
	case spec.StartCmd == "":
		say(0, fmt.Sprintf("start command inherited from template %s: %s", parent.Name, st.StartCmd))
	case spec.StartCmd != parent.StartCmd:
		logf(LogEntry{Time: time.Now(), Level: "warn", Message: fmt.Sprintf("the start command %q replaces template %s's, %q, and its ready command: "+
			"this template's sandboxes run only this one (give both in one start command to keep both)", spec.StartCmd, parent.Name, parent.StartCmd)})
	}
	if st.StartCmd != "" {
		// The start check is cached like a step: the same image with the
		// same commands passed it before.
		st.Key = stepKey(st.Key, Step{Type: "START", Args: []string{st.StartCmd, st.ReadyCmd}})
		if _, ok := b.cached(st.Key); ok && !spec.Force {
			say(0, "CACHED start: "+st.StartCmd)
			return st.Image, nil
		}
		say(0, "starting: "+st.StartCmd)
		if err := b.checkStart(ctx, st.Image, build, stepOut(0)); err != nil {
			return Image{}, &StepError{Err: err}
		}
		b.remember(st)
	}
	return st.Image, nil
}

// parentStart is the start and ready commands of the template a build
// starts from, and its name.
type parentStart struct {
	Name               string
	StartCmd, ReadyCmd string
}

// startCommands are the start and ready commands of a build of spec over
// parent: the build's own start command replaces the parent's (and its
// ready command); without one the parent's runs, with the build's ready
// command when it gives one. A template built over code-interpreter-v1 is
// a code interpreter still.
func startCommands(spec Spec, parent parentStart) (start, ready string) {
	if spec.StartCmd != "" || parent.StartCmd == "" {
		return spec.StartCmd, spec.ReadyCmd
	}
	return parent.StartCmd, cmp.Or(spec.ReadyCmd, parent.ReadyCmd)
}

// start is the state before the first step, and the commands of the
// template it starts from (none from an image or debootstrap).
func (b *Builder) start(ctx context.Context, team string, spec Spec, budget *fsutil.Budget, say func(string)) (state, parentStart, error) {
	st, err := b.startFrom(ctx, team, spec, budget, say)
	if err != nil || spec.FromImage != "" || spec.FromDebootstrap != nil {
		return st, parentStart{}, err
	}
	parent := parentStart{Name: cmp.Or(spec.FromTemplate, BaseName), StartCmd: st.StartCmd, ReadyCmd: st.ReadyCmd}
	st.StartCmd, st.ReadyCmd = "", ""
	return st, parent, nil
}

// startFrom is the state before the first step: an image's, a
// debootstrap's, or a template's (its commands kept).
func (b *Builder) startFrom(ctx context.Context, team string, spec Spec, budget *fsutil.Budget, say func(string)) (state, error) {
	if spec.FromImage != "" && spec.FromTemplate != "" {
		return state{}, errs.New(errs.InvalidArgument, "give fromImage or fromTemplate, not both")
	}
	if spec.FromDebootstrap != nil {
		d := *spec.FromDebootstrap
		d.Mirror = cmp.Or(d.Mirror, b.Mirror)
		key := d.key()
		if cached, ok := b.cached(key); ok && !spec.Force {
			say("CACHED " + key)
			return cached, nil
		}
		cacheDir := ""
		if spec.DebCache {
			var err error
			if cacheDir, err = b.debCache(); err != nil {
				return state{}, err
			}
		}
		layer, err := b.store.layers.debootstrap(ctx, b.Debootstrap, d, cacheDir, say)
		if err != nil {
			return state{}, err
		}
		st := state{Image: Image{Layers: []string{layer}, User: "root", Workdir: "/",
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}, Key: key}
		b.remember(st)
		return st, nil
	}
	if spec.FromImage == "" {
		from := spec.FromTemplate
		if from == "" {
			from = BaseName
		}
		t, err := b.store.Resolve(ctx, team, from)
		if err != nil {
			return state{}, err
		}
		r, err := b.store.Get(team, t.ID)
		if err != nil {
			return state{}, err
		}
		img := r.Build(t.BuildID).Image
		say("from template " + from)
		return state{Image: img, Key: "template:" + t.ID + "/" + t.BuildID}, nil
	}
	if IsLocalImage(spec.FromImage) && !b.AllowLocalImages {
		return state{}, errs.New(errs.PermissionDenied, "images from the node's disk (%s) are not enabled on this server", spec.FromImage)
	}
	say("pulling " + spec.FromImage)
	// What the registry said stays in the node's log: the tenant reads
	// pullError's status code or fixed reason.
	pullFailed := func(err error) error {
		b.log.Info("image pull failed", "image", spec.FromImage, logx.Err(err))
		return pullError(spec.FromImage, err)
	}
	img, err := openImage(ctx, spec.FromImage, b.registries())
	var pe *pullErr
	if errors.As(err, &pe) {
		return state{}, pullFailed(pe.err)
	} else if err != nil {
		return state{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return state{}, pullFailed(err)
	}
	key := "image:" + digest.String()
	if cached, ok := b.cached(key); ok {
		say("image " + digest.String()[:19] + " cached")
		return cached, nil
	}
	layers, cfg, err := b.store.layers.importImage(ctx, img, budget, say)
	if farEnd(err) {
		return state{}, pullFailed(err)
	} else if err != nil {
		return state{}, err
	}
	st := state{Image: Image{Layers: layers, User: cfg.User, Workdir: cfg.WorkingDir, Env: cfg.Env}, Key: key}
	if st.User == "" {
		st.User = "root"
	}
	if st.Workdir == "" {
		st.Workdir = "/"
	}
	b.remember(st)
	return st, nil
}

// stepKey chains a step onto the key of what came before it.
// stepFormat changes when the layers steps make change: cached steps of
// another format are built again. 2: a directory a step changed no longer
// takes a lower layer's opaque marker as its own. 3: a COPY step is keyed
// by the SHA-256 the server computed of its archive, not the client's hash
// (a step cached under a client's hash may hold another team's files).
const stepFormat = "3"

func stepKey(prev string, step Step) string {
	h := sha256.New()
	h.Write([]byte(stepFormat))
	h.Write([]byte(prev))
	h.Write([]byte{0})
	data, _ := json.Marshal([]any{step.Type, step.Args, step.FilesHash})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

func (b *Builder) cachePath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(b.store.dir, "cache", hex.EncodeToString(sum[:])+".json")
}

// cached returns the state a key led to before, if its layers are still
// stored.
func (b *Builder) cached(key string) (state, bool) {
	data, err := os.ReadFile(b.cachePath(key))
	if err != nil {
		return state{}, false
	}
	var st state
	if json.Unmarshal(data, &st) != nil || st.Key != key {
		return state{}, false
	}
	for _, l := range st.Layers {
		if !b.store.layers.Has(l) {
			return state{}, false
		}
	}
	return st, true
}

func (b *Builder) remember(st state) {
	if err := fsutil.WriteJSON(b.cachePath(st.Key), st); err != nil {
		b.log.Warn("remember build step", logx.Err(err))
	}
}

func describe(s Step) string {
	return brief(strings.TrimSpace(s.Type + " " + strings.Join(s.Args, " ")))
}

// brief is a command as logs and errors show it: its first line, and how
// many more it has (a recipe's step carries a file in a here-document).
func brief(cmd string) string {
	first, rest, ok := strings.Cut(cmd, "\n")
	if !ok {
		return cmd
	}
	return fmt.Sprintf("%s … (%d more lines)", first, strings.Count(rest, "\n")+1)
}

// runStep applies one step to st.
func (b *Builder) runStep(ctx context.Context, st state, step Step, build Build, debCache bool, budget *fsutil.Budget, out func(string)) (state, error) {
	next := st
	next.Layers = slices.Clone(st.Layers)
	next.Env = slices.Clone(st.Env)
	add := func(layer string) {
		if layer != "" {
			next.Layers = append(next.Layers, layer)
		}
	}
	switch strings.ToUpper(step.Type) {
	case "ENV":
		if len(step.Args)%2 != 0 || len(step.Args) == 0 {
			return st, errs.New(errs.InvalidArgument, "ENV takes name and value pairs")
		}
		for i := 0; i < len(step.Args); i += 2 {
			next.Env = setEnv(next.Env, step.Args[i], step.Args[i+1])
		}
	case "USER":
		if len(step.Args) < 1 || step.Args[0] == "" {
			return st, errs.New(errs.InvalidArgument, "USER takes a user name")
		}
		next.User = step.Args[0]
	case "WORKDIR":
		if len(step.Args) != 1 || step.Args[0] == "" {
			return st, errs.New(errs.InvalidArgument, "WORKDIR takes one path")
		}
		dir := step.Args[0]
		if !path.IsAbs(dir) {
			dir = path.Join(st.Workdir, dir)
		}
		next.Workdir = path.Clean(dir)
		layer, err := b.workdirLayer(st, next.Workdir)
		if err != nil {
			return st, err
		}
		add(layer)
	case "RUN":
		if len(step.Args) < 1 || strings.TrimSpace(step.Args[0]) == "" {
			return st, errs.New(errs.InvalidArgument, "RUN takes a command")
		}
		user := st.User
		if len(step.Args) > 1 && step.Args[1] != "" {
			user = step.Args[1]
		}
		layer, err := b.runLayer(ctx, st, build, Exec{Cmd: step.Args[0], User: user, Workdir: st.Workdir, Env: envMap(st.Env)}, debCache, out)
		if err != nil {
			return st, err
		}
		add(layer)
	case "COPY", "ADD":
		layer, err := b.copyLayer(ctx, st, step, budget)
		if err != nil {
			return st, err
		}
		add(layer)
	default:
		return st, errs.New(errs.InvalidArgument, "unknown step type %q", step.Type)
	}
	return next, nil
}

// runLayer runs cmd in a build sandbox over st and returns what it wrote
// as a layer.
func (b *Builder) runLayer(ctx context.Context, st state, build Build, cmd Exec, debCache bool, out func(string)) (string, error) {
	scratch, err := os.MkdirTemp(b.store.dir, "build-")
	if err != nil {
		return "", err
	}
	t := b.store.image(st.Image, build)
	// The step writes into a tmpfs capped as a sandbox's writable layer is
	// (its pages count against the build sandbox's memory), never straight
	// onto the host's disk.
	limit := isolation.Limits{MemoryMB: int64(max(t.MemoryMB, isolation.MinMemoryMB)), DiskMB: isolation.MaxDiskMB}.WritableBytes()
	if err := mountTmpfs(scratch, false, "mode=700,"+isolation.TmpfsLimits(limit)); err != nil {
		os.Remove(scratch)
		return "", fmt.Errorf("mount the step's writable layer: %w", err)
	}
	defer func() {
		if err := unmount(scratch); err != nil {
			b.log.Error("unmount build scratch", "path", scratch, logx.Err(err))
			return // never remove what may still hold the mount
		}
		if err := fsutil.RemoveTree(scratch); err != nil {
			b.log.Error("remove build scratch", "path", scratch, logx.Err(err))
		}
	}()
	t.RootFS.Upper = scratch
	if debCache {
		if err := b.withDebCache(&t); err != nil {
			return "", fmt.Errorf("the package cache: %w", err)
		}
	}
	sb, err := b.sandboxes.StartBuild(ctx, t)
	if err != nil {
		return "", fmt.Errorf("start build sandbox: %w", err)
	}
	code, err := sb.Exec(ctx, cmd, out)
	if cerr := sb.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("stop build sandbox: %w", cerr)
	}
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("%s: exit code %d", brief(cmd.Cmd), code)
	}
	upper := filepath.Join(scratch, "upper")
	if debCache {
		if err := b.harvestDebs(upper); err != nil {
			return "", fmt.Errorf("keep the step's packages: %w", err)
		}
	}
	if err := dropIdentityFiles(upper); err != nil {
		return "", err
	}
	stage, err := b.store.layers.stage()
	if err != nil {
		return "", err
	}
	if err := os.Remove(stage); err != nil {
		return "", err
	}
	// Out of the tmpfs onto the layers' disk: whiteouts and opaque
	// directories kept, links copied as links, never followed.
	if err := fsutil.CopyTree(upper, stage, fsutil.CopyOptions{Overlay: true}); err != nil {
		removeStage(stage)
		return "", fmt.Errorf("take the step's layer: %w", err)
	}
	return b.store.layers.commitByContent(stage)
}

// dropIdentityFiles removes from a step's writable layer the files the
// build sandbox's start wrote (hostname, hosts, resolv.conf): they are not
// the step's. The step wrote that directory, so nothing in it is followed:
// an /etc that is a symlink keeps whatever it holds.
func dropIdentityFiles(upper string) error {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return fmt.Errorf("open the step's layer: %w", err)
	}
	defer root.Close()
	if st, err := root.Lstat("etc"); err != nil || !st.IsDir() {
		return nil
	}
	for _, f := range []string{"hostname", "hosts", "resolv.conf"} {
		if err := root.Remove("etc/" + f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drop the sandbox's /etc/%s from the layer: %w", f, err)
		}
	}
	return nil
}

// checkStart starts the start command in a sandbox of the finished image
// and waits for the ready command to pass, as every sandbox will.
func (b *Builder) checkStart(ctx context.Context, img Image, build Build, out func(string)) error {
	t := b.store.image(img, build)
	sb, err := b.sandboxes.StartBuild(ctx, t)
	if err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	defer sb.Close()
	env := envMap(img.Env)
	if _, err := sb.Exec(ctx, Exec{Cmd: img.StartCmd, User: img.User, Workdir: img.Workdir, Env: env, Background: true}, out); err != nil {
		return fmt.Errorf("start command: %w", err)
	}
	if img.ReadyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.ReadyTimeout)
	defer cancel()
	for wait := 20 * time.Millisecond; ; {
		code, err := sb.Exec(ctx, Exec{Cmd: img.ReadyCmd, User: img.User, Workdir: img.Workdir, Env: env}, func(string) {})
		if err == nil && code == 0 {
			out("ready: " + img.ReadyCmd)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ready command %q did not pass within %s", img.ReadyCmd, b.ReadyTimeout)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// image is the template a build sandbox over img runs as.
func (s *Store) image(img Image, build Build) Template {
	r := &Record{ID: "build"}
	b := build
	b.Image = img
	return s.resolved(r, &b)
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// workdirLayer makes the working directory when no layer has it yet.
func (b *Builder) workdirLayer(st state, dir string) (string, error) {
	rel := strings.TrimPrefix(dir, "/")
	if rel == "" {
		return "", nil
	}
	if fi, ok := b.store.layers.lookup(st.Layers, rel); ok {
		if !fi.IsDir() {
			return "", errs.New(errs.InvalidArgument, "WORKDIR %s is not a directory", dir)
		}
		return "", nil
	}
	stage, err := b.store.layers.stage()
	if err != nil {
		return "", err
	}
	ids, err := b.lookupIDs(st, st.User)
	if err == nil {
		err = b.mkParents(st, stage, rel, ids)
	}
	if err != nil {
		removeStage(stage)
		return "", err
	}
	return b.store.layers.commitByContent(stage)
}

// mkParents makes rel and its parents in stage, each with the mode and
// owner it has in the layers below (so the new layer does not change
// them), or 0755 and owner for new ones.
func (b *Builder) mkParents(st state, stage, rel string, owner fsutil.Ids) error {
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		p := filepath.Join(stage, sub)
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			continue
		} else if err == nil {
			return errs.New(errs.InvalidArgument, "/%s is not a directory", sub)
		}
		mode, uid, gid := os.FileMode(0o755), owner.UID, owner.GID
		if fi, ok := b.store.layers.lookup(st.Layers, sub); ok {
			if !fi.IsDir() {
				return errs.New(errs.InvalidArgument, "/%s is not a directory", sub)
			}
			mode = fi.Mode() & (fs.ModePerm | fs.ModeSticky | fs.ModeSetgid | fs.ModeSetuid)
			o := fsutil.Owner(fi)
			uid, gid = int(o>>32), int(uint32(o))
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

// charge counts a step's new layers against its build's budget: the
// team's storage is checked as each layer is committed, not only when the
// build starts.
func (b *Builder) charge(budget *fsutil.Budget, layers []string) error {
	for _, l := range layers {
		n, err := b.store.layerBytes(filepath.Base(l))
		if err != nil {
			return err
		}
		if err := budget.Charge(n); err != nil {
			return err
		}
	}
	return nil
}
