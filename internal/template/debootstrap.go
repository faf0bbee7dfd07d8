package template

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
)

// Debootstrap is a Debian root file system made by debootstrap on the
// node: a base for hosts without a registry.
type Debootstrap struct {
	Suite   string   // bookworm
	Variant string   // minbase
	Include []string // packages installed with it
	Mirror  string   // "" = the host's Debian mirror (its apt sources)
}

func (d Debootstrap) key() string {
	return fmt.Sprintf("debootstrap:%s/%s/%s/%s", d.Suite, d.Variant, strings.Join(d.Include, ","), d.mirror())
}

func (d Debootstrap) mirror() string {
	if d.Mirror != "" {
		return d.Mirror
	}
	return hostMirror()
}

// hostMirror is the first Debian archive the host's apt sources name.
func hostMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	for _, f := range append([]string{"/etc/apt/sources.list"}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) >= 2 && fields[0] == "deb": // one-line form
				for _, u := range fields[1:] {
					if strings.HasPrefix(u, "http") && strings.HasSuffix(strings.TrimSuffix(u, "/"), "/debian") {
						return u
					}
				}
			case len(fields) >= 2 && fields[0] == "URIs:": // deb822 form
				for _, u := range fields[1:] {
					if strings.HasSuffix(strings.TrimSuffix(u, "/"), "/debian") {
						return u
					}
				}
			}
		}
	}
	return "http://deb.debian.org/debian"
}

// CanBuild says why spec cannot be built on this node, nil if it can: a
// base made by debootstrap needs the program.
func (b *Builder) CanBuild(spec Spec) error {
	if spec.FromDebootstrap == nil {
		return nil
	}
	program := cmp.Or(b.Debootstrap, "debootstrap")
	if _, err := exec.LookPath(program); err != nil {
		return errs.New(errs.Unavailable, "it is made from Debian's archive with debootstrap, which is not installed on this node: "+
			"apt-get install debootstrap (or start cove server with --debootstrap PATH) (%v)", err)
	}
	return nil
}

// debootstrap makes the layer: debootstrap runs in a mount namespace of its
// own (the /proc and /sys it mounts in the target never reach the host and
// go with it), its output goes to say, and the package cache and lists are
// left out of the layer.
func (l Layers) debootstrap(ctx context.Context, program string, d Debootstrap, cacheDir string, say func(string)) (string, error) {
	if program == "" {
		program = "debootstrap"
	}
	bin, err := exec.LookPath(program)
	if err != nil {
		return "", errs.New(errs.Unavailable, "debootstrap is not installed on this node (apt-get install debootstrap): %v", err)
	}
	// debootstrap writes into a tmpfs, then the tree is copied onto the
	// layers' disk: dpkg syncs every file it unpacks, which on a disk was
	// a quarter of debootstrap's time (82 → 60 s on 2 cores).
	work, err := os.MkdirTemp(l.dir, ".debootstrap-")
	if err != nil {
		return "", err
	}
	// debootstrap makes device nodes and refuses a nodev target; the copy
	// onto the disk leaves them out, as every layer does.
	if err := mountTmpfs(work, true, "mode=700"); err != nil {
		os.Remove(work)
		return "", fmt.Errorf("mount debootstrap's tmpfs: %w", err)
	}
	defer func() {
		if err := unmount(work); err != nil {
			return // never remove what may still hold the mount
		}
		removeStage(work)
	}()
	target := filepath.Join(work, "root")
	args := []string{"--variant=" + d.Variant}
	if len(d.Include) > 0 {
		args = append(args, "--include="+strings.Join(d.Include, ","))
	}
	if cacheDir != "" {
		args = append(args, "--cache-dir="+cacheDir)
	}
	args = append(args, d.Suite, target, d.mirror())
	say("debootstrap " + strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = ownMounts()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			say(sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	err = cmd.Run()
	pw.Close()
	wg.Wait()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("debootstrap %s: %w (its log is above)", d.Suite, err)
	}
	for _, dir := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		if err := emptyDir(filepath.Join(target, dir)); err != nil {
			return "", err
		}
	}
	say("storing the layer")
	stage, err := l.stage()
	if err != nil {
		return "", err
	}
	if err := os.Remove(stage); err != nil {
		return "", err
	}
	if err := fsutil.CopyTree(target, stage, fsutil.CopyOptions{}); err != nil {
		removeStage(stage)
		return "", fmt.Errorf("copy debootstrap's tree to the layers: %w", err)
	}
	return l.commitByContent(stage)
}

// emptyDir removes the regular files directly in dir (apt's cache: .deb
// files and lists), keeping its subdirectories.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Recipes are built-in templates built on first use: debian (debootstrap
// bookworm minbase with what E2B's base template has: python3 and python,
// nodejs, npm and yarn, git, curl, tput, build tools and sudo, and E2B's
// `user` account; base with --base=debian), code-interpreter-v1 (the same on trixie, for its
// Python 3.13, with the kernels from Debian's archive and E2B's Python
// packages from PyPI) and desktop (debian with the X11 desktop
// @e2b/desktop drives).
var Recipes = map[string]Spec{
	"debian": {
		DebCache:        true,
		FromDebootstrap: &Debootstrap{Suite: "bookworm", Variant: "minbase", Include: e2bBasePackages},
		Steps:           e2bBaseSteps(),
	},
	"code-interpreter-v1": {
		DebCache:        true,
		FromDebootstrap: &Debootstrap{Suite: "trixie", Variant: "minbase", Include: e2bBasePackages},
		Steps:           e2bBaseSteps(append(aptSteps(CodeInterpreterPackages), pipSteps(codeInterpreterLock, codeInterpreterLarge)...)...),
		StartCmd:        CodeInterpreterStart,
		ReadyCmd:        CodeInterpreterReady,
		CPUCount:        2, MemoryMB: 2048, // E2B's
	},
	"desktop": {
		DebCache:     true,
		FromTemplate: "debian",
		Steps: append(append([]Step{{Type: "USER", Args: []string{"root"}}}, aptSteps(DesktopPackages)...),
			Step{Type: "RUN", Args: []string{DesktopSetup}},
			Step{Type: "USER", Args: []string{"user"}}),
		CPUCount: 2, MemoryMB: 2048,
	},
}

// e2bBasePackages are what debootstrap installs for the recipes: what
// E2B's base image has (python3 and python, nodejs, git, curl, sudo, build
// tools, tput) and what the sandbox's tools need.
var e2bBasePackages = []string{"python3", "python-is-python3", "nodejs", "git", "curl", "sudo", "ca-certificates", "procps",
	"iproute2", "less", "ncurses-bin", "build-essential"}

// e2bBaseSteps make a debootstrap base E2B's base: npm and yarn (and
// their few hundred node-* packages) through apt in a build step
// (debootstrap's own configuration pass fails on them; Debian names yarn
// yarnpkg, so yarn is linked to it), E2B's `user` with passwordless sudo,
// and /code; then the recipe's own steps, as root; last `user` in
// /home/user as the default user and directory.
func e2bBaseSteps(own ...Step) []Step {
	steps := append([]Step{{Type: "USER", Args: []string{"root"}}}, aptSteps([][]string{{"npm", "yarnpkg"}})...)
	steps = append(steps, Step{Type: "RUN", Args: []string{"useradd -m -s /bin/bash -u 1000 -G sudo user" +
		" && echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/user && chmod 440 /etc/sudoers.d/user" +
		" && passwd -d user && mkdir -p /code && chmod 777 /code /usr/local && ln -s /usr/bin/yarnpkg /usr/local/bin/yarn"}})
	steps = append(steps, own...)
	return append(steps, Step{Type: "USER", Args: []string{"user"}}, Step{Type: "WORKDIR", Args: []string{"/home/user"}})
}

// DesktopPackages are the Debian packages desktop adds to debian: what
// @e2b/desktop runs in the sandbox (its SDK starts the display and the
// session itself, through commands): Xvfb and xdpyinfo, an XFCE session
// (D-Bus's X11 launcher starts its bus), xdotool, scrot, xrandr, x11vnc
// and noVNC with websockify, netstat, xdg-open and gtk-launch; fonts and a
// terminal make it a desktop to work in.
var DesktopPackages = [][]string{
	{"xvfb", "x11-utils", "x11-xserver-utils", "xfonts-base", "fonts-dejavu-core", "xdotool", "scrot",
		"x11vnc", "novnc", "websockify", "net-tools", "xdg-utils"},
	{"xfce4-session", "xfwm4", "xfdesktop4", "xfce4-panel", "xfce4-settings", "xfce4-terminal", "dbus-x11", "libgtk-3-bin"},
}

// DesktopSetup is desktop's last step, as root: noVNC where the SDK looks
// for it (/opt/noVNC, Debian keeps it in /usr/share/novnc) and a D-Bus
// machine id, which the session bus needs (each sandbox of the template
// shares it, as each container of an image does).
const DesktopSetup = "ln -sfn /usr/share/novnc /opt/noVNC && mkdir -p /var/lib/dbus && dbus-uuidgen --ensure"

// CodeInterpreterKernels are the Debian packages of code-interpreter-v1's
// kernels but Python's: IRkernel, a JDK for JShell, TypeScript's compiler
// for the Node kernel.
var CodeInterpreterKernels = []string{"r-cran-irkernel", "default-jdk-headless", "node-typescript"}

// CodeInterpreterPackages are the Debian packages code-interpreter-v1
// adds to its base, a step (a layer) per group: each step's writes (the
// downloaded archives too) must fit a build sandbox's writable layer. The
// kernels, pip, and the libraries OpenCV's wheel loads (GL, GLib).
var CodeInterpreterPackages = [][]string{
	append(slices.Clone(CodeInterpreterKernels), "python3-pip", "libgl1", "libglib2.0-0t64"),
}

// codeInterpreterLock is what code-interpreter-v1's Python installs from
// PyPI: E2B's code-interpreter-v1 packages at its versions
// (recipes/code-interpreter.in; CodeInterpreterPython), and all they pull
// in, each pinned with the sha256 of its wheels for CPython 3.13 on x86-64
// (recipes/code-interpreter.lock, made by scripts/code-interpreter-lock.sh).
//
//go:embed recipes/code-interpreter.lock
var codeInterpreterLock string

// codeInterpreterLarge are the largest packages of code-interpreter-v1's
// Python (1.1 GB of its 2.2 GB), in groups: pip installs each group in a
// step of its own and the others in one after, so that each step's writes
// (the wheels it fetches, their files, bytecode) fit a build sandbox's
// writable layer (1.5 GiB): 699, 402 and 1080 MiB stay.
var codeInterpreterLarge = [][]string{
	{"llvmlite", "numba", "opencv-python", "spacy", "scipy", "gensim"},
	{"pyarrow", "polars-runtime-32", "duckdb"},
}

// pipSteps install what lock pins in a RUN step per group of package
// names, then the others in one (each lock entry is whole in one: --no-deps
// needs no package's dependencies in the same step).
func pipSteps(lock string, groups [][]string) []Step {
	parts := make([]strings.Builder, len(groups)+1)
	for _, entry := range lockEntries(lock) {
		name, _, _ := strings.Cut(entry, "==")
		i := slices.IndexFunc(groups, func(g []string) bool { return slices.Contains(g, name) })
		if i < 0 {
			i = len(groups)
		}
		parts[i].WriteString(entry)
	}
	steps := make([]Step, len(parts))
	for i := range parts {
		steps[i] = Step{Type: "RUN", Args: []string{pipStep(parts[i].String())}}
	}
	return steps
}

// lockEntries splits a pip lock into its entries: a `name==version` line
// and the hash lines that continue it, each ending in a newline.
func lockEntries(lock string) []string {
	var out []string
	for _, line := range strings.SplitAfter(lock, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == ' ' && len(out) > 0:
			out[len(out)-1] += line
		default:
			out = append(out, line)
		}
	}
	return out
}

// pipStep installs the packages lock pins into the system's Python, as
// root (under /usr/local, where Debian's pip puts them), wheels only and
// each checked against its hashes, beside what Debian's packages put in
// /usr/lib (pip's own dependencies: never uninstalled, found after
// /usr/local); pip's cache stays out of the layer. pip trusts the node's
// certificates where the step has them.
func pipStep(lock string) string {
	certs := hostCertsTarget + "/ca-certificates.crt"
	return "cat > /tmp/cove-python.lock <<'EOF'\n" + lock + "EOF\n" +
		"if [ -f " + certs + " ]; then export PIP_CERT=" + certs + "; fi\n" +
		"pip install --no-input --disable-pip-version-check --root-user-action=ignore --break-system-packages --no-cache-dir " +
		"--ignore-installed --require-hashes --only-binary :all: --no-deps -r /tmp/cove-python.lock && rm /tmp/cove-python.lock"
}

// aptSteps installs each group of packages in a RUN step of its own,
// from the node's package cache where it holds them (debcache.go: the
// builder takes what apt-get fetched out of the layer into the cache).
// dpkg skips its syncs (a build cut short is thrown away, never used),
// and Python's bytecode is compiled
// once at the end of the step on every CPU, not package by package on one
// (py3compile, which each package's postinst runs, is a no-op meanwhile;
// a file that does not compile is left to Python, as py3compile leaves it).
func aptSteps(groups [][]string) []Step {
	steps := make([]Step, len(groups))
	for i, pkgs := range groups {
		steps[i] = Step{Type: "RUN", Args: []string{"ln -s " + debCacheTarget + "/*.deb /var/cache/apt/archives/ 2>/dev/null; " +
			"dpkg-divert --quiet --local --rename --add /usr/bin/py3compile && ln -s /bin/true /usr/bin/py3compile && " +
			"apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-unsafe-io " +
			strings.Join(pkgs, " ") + " && rm -rf /var/lib/apt/lists/* && " +
			"rm /usr/bin/py3compile && dpkg-divert --quiet --local --rename --remove /usr/bin/py3compile && " +
			"if [ -x /usr/bin/python3 ]; then python3 -m compileall -q -j0 /usr/lib/python3/dist-packages >/dev/null || true; fi"}}
	}
	return steps
}

// The code interpreter's start and ready commands: the sandbox binary
// (bound at /.cove/cove-envd in every sandbox) serves port 49999, ready
// once its default Python and JavaScript contexts are. It runs as root
// through the sandbox's sudo, as E2B's runs (its Jupyter is a root
// service): kernels may work in /root, and their files are root's.
const (
	CodeInterpreterStart = "sudo /.cove/cove-envd code-interpreter"
	CodeInterpreterReady = "/.cove/cove-envd code-interpreter --ready"
)

// RecipeSeconds is how long each recipe's base and steps took (seconds;
// [0] the base, then each of Steps), measured on a 2-core machine with a
// fast mirror (debian and desktop with no package cache,
// code-interpreter-v1 with a warm one; its pip steps always download):
// what progress reports weigh them by.
var RecipeSeconds = map[string][]float64{
	"debian":              {73, 0, 35, 0.3, 0, 0},
	"code-interpreter-v1": {40, 0, 20, 0.1, 21, 15, 8, 70, 0, 0.7}, // the last: the start check's share is folded in
	"desktop":             {0, 0, 80, 40, 0.5, 0},
}

// RecipeShare is the part of the time to build recipe child (and what it
// starts from) that recipe parent, which it starts from, takes.
func RecipeShare(parent, child string) float64 {
	sum := func(name string) float64 {
		var s float64
		for _, v := range RecipeSeconds[name] {
			s += v
		}
		return s
	}
	p, c := sum(parent), sum(child)
	if p+c == 0 {
		return 0
	}
	return p / (p + c)
}

// RecipeVersion is the version of recipe name: a digest of its spec and
// of the version of the recipe it starts from, so that a change to either
// makes a new version. A build of a recipe records the version it was
// made from (Build.Recipe); a node rebuilds a recipe whose ready build is
// of another version (one made before this version of Cove).
func RecipeVersion(name string) string {
	spec, ok := Recipes[name]
	if !ok {
		return ""
	}
	data, err := json.Marshal(spec)
	if err != nil {
		panic(fmt.Sprintf("recipe %s: %v", name, err)) // a Spec always marshals
	}
	h := sha256.New()
	h.Write(data)
	if spec.FromTemplate != "" {
		h.Write([]byte{0})
		h.Write([]byte(RecipeVersion(spec.FromTemplate)))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// RecipeOrder is the order recipes depend on each other.
var RecipeOrder = []string{"debian", "code-interpreter-v1", "desktop"}

// PreparedAhead is the recipe a node prepares in the background (with
// debian, which it starts from); desktop, several times its size, is
// built on its first use.
const PreparedAhead = "code-interpreter-v1"
