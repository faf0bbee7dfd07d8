package template

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

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
	if err := unix.Mount("tmpfs", work, "tmpfs", unix.MS_NOSUID, "mode=700"); err != nil {
		os.Remove(work)
		return "", fmt.Errorf("mount debootstrap's tmpfs: %w", err)
	}
	defer func() {
		if err := unix.Unmount(work, unix.MNT_DETACH); err != nil {
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true}
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
// nodejs and npm, git, curl, tput, build tools and sudo, and E2B's
// `user` account), code-interpreter-v1 (debian with numpy, pandas and
// matplotlib from Debian's archive) and desktop (debian with the X11
// desktop @e2b/desktop drives).
var Recipes = map[string]Spec{
	"debian": {
		DebCache: true,
		FromDebootstrap: &Debootstrap{Suite: "bookworm", Variant: "minbase",
			Include: []string{"python3", "python-is-python3", "nodejs", "git", "curl", "sudo", "ca-certificates", "procps",
				"iproute2", "less", "ncurses-bin", "build-essential"}},
		// npm (and its few hundred node-* packages) through apt in a build
		// step: debootstrap's own configuration pass fails on it.
		Steps: append(append([]Step{{Type: "USER", Args: []string{"root"}}}, aptSteps([][]string{{"npm"}})...),
			Step{Type: "RUN", Args: []string{"useradd -m -s /bin/bash -u 1000 -G sudo user" +
				" && echo 'user ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/user && chmod 440 /etc/sudoers.d/user" +
				" && passwd -d user && mkdir -p /code && chmod 777 /code /usr/local"}},
			Step{Type: "USER", Args: []string{"user"}},
			Step{Type: "WORKDIR", Args: []string{"/home/user"}},
		),
	},
	"code-interpreter-v1": {
		DebCache:     true,
		FromTemplate: "debian",
		Steps: append(append([]Step{{Type: "USER", Args: []string{"root"}}}, aptSteps(CodeInterpreterPackages)...),
			Step{Type: "USER", Args: []string{"user"}}),
		StartCmd: CodeInterpreterStart,
		ReadyCmd: CodeInterpreterReady,
		CPUCount: 2, MemoryMB: 2048, // E2B's
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

// CodeInterpreterPackages are the Debian packages code-interpreter-v1
// adds to debian, a step (a layer) per group: each step's writes (the
// downloaded archives too) must fit a build sandbox's writable layer. The
// kernels (IPython's, IRkernel, a JDK for JShell, TypeScript's compiler for
// the Node kernel) and the usual data libraries.
var CodeInterpreterPackages = [][]string{
	{"python3-ipykernel", "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-pil"},
	{"r-cran-irkernel", "default-jdk-headless", "node-typescript"},
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
// fast mirror and no package cache: what progress reports weigh them by.
var RecipeSeconds = map[string][]float64{
	"debian":              {73, 0, 35, 0.3, 0, 0},
	"code-interpreter-v1": {0, 0, 66, 26, 1.5}, // the last: the start check's share is folded in
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
