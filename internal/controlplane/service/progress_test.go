package service

import (
	"strings"
	"testing"

	"github.com/covesandbox/cove/internal/template"
)

// TestProgress feeds builds' log lines, as debootstrap, apt-get and the
// builder write them, and checks how far each says the build is.
func TestProgress(t *testing.T) {
	debian := template.Recipes["debian"]
	type line struct {
		step, msg string
		want      int    // percent after the line; -1: not checked
		doing     string // a part of what it does now; "" not checked
	}
	apt := func(step string) []line {
		return []line{
			{step, "RUN apt-get update && apt-get install -y npm", -1, "step 2 of 5: installing npm"},
			{step, "0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded.", -1, ""},
			{step, "Get:1 http://deb.debian.org/debian bookworm/main amd64 a all 1 [10 kB]", -1, ""},
			{step, "Get:2 http://deb.debian.org/debian bookworm/main amd64 b all 1 [10 kB]", -1, ""},
			{step, "Unpacking a (1) ...", -1, ""},
			{step, "Unpacking b (1) ...", -1, ""},
			{step, "Setting up a (1) ...", -1, "(apt: 1 of 2 packages set up)"},
		}
	}
	for _, tc := range []struct {
		name  string
		spec  template.Spec
		secs  []float64
		lines []line
	}{
		{"debian, measured weights", debian, template.RecipeSeconds["debian"], append([]line{
			{"", "debootstrap --variant=minbase bookworm /x", 0, "starting"},
			{"", "I: Retrieving InRelease", 0, "fetching the archive's index"},
			{"", "I: Retrieving Packages", 0, "fetching the archive's index"},
			{"", "I: Resolving dependencies of required packages...", 2, "resolving"},
			{"", "I: Retrieving libc6 2.36", 12, "downloading packages"},
			{"", "I: Retrieving libc-bin 2.36", 12, "downloading packages"},
			{"", "I: Unpacking the base system...", 37, "unpacking the base system"},
			{"", "I: Retrieving perl 5", 37, "unpacking the base system"}, // never back
			{"", "I: Base system installed successfully.", 66, ""},
			{"1", "USER root", 67, "step 1 of 5: USER root"},
		}, append(apt("2"), []line{
			{"3", "RUN useradd -m user", 99, ""},
			{"5", "CACHED WORKDIR /home/user", 99, ""},
		}...)...)},
		{"a user's build, steps alike", template.Spec{Steps: []template.Step{
			{Type: "RUN", Args: []string{"make"}}, {Type: "ENV", Args: []string{"A", "1"}}, {Type: "COPY", Args: []string{"a", "/a"}}}}, nil, []line{
			{"", "pulling python:3.12", 0, "starting"},
			{"1", "RUN make", 33, "step 1 of 3: RUN make"},
			{"3", "COPY a /a", 66, "step 3 of 3"},
			{"", "starting: sleep inf", 99, "start command"},
		}},
		{"a here-document, a pip lock", template.Spec{Steps: []template.Step{
			{Type: "RUN", Args: []string{"cat > /x <<'EOF'\nline two\nEOF\nmake"}},
			{Type: "RUN", Args: []string{"cat > /l <<'EOF'\na==1 \\\n    --hash=sha256:00\nb==2\nEOF\npip install -r /l"}}}}, nil, []line{
			{"1", "RUN cat", 33, "step 1 of 2: RUN cat > /x <<'EOF'"},
			{"2", "RUN cat", 66, "step 2 of 2: installing 2 Python packages (pip)"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProgress(tc.spec, tc.secs)
			last := 0
			for _, l := range tc.lines {
				p.add(template.LogEntry{Step: l.step, Message: l.msg})
				pct, doing := p.value()
				if pct < last {
					t.Errorf("after %q: %d%%, down from %d%%", l.msg, pct, last)
				}
				last = pct
				if l.want >= 0 && pct != l.want {
					t.Errorf("after %q: %d%%, want %d%%", l.msg, pct, l.want)
				}
				if l.doing != "" && !strings.Contains(doing, l.doing) {
					t.Errorf("after %q: doing %q, want %q in it", l.msg, doing, l.doing)
				}
			}
		})
	}
}

// TestProgressWaitsForParent: a recipe built on another tells that one's
// progress while it waits, then goes on from that share.
func TestProgressWaitsForParent(t *testing.T) {
	parent := newProgress(template.Recipes["debian"], template.RecipeSeconds["debian"])
	child := newProgress(template.Recipes["desktop"], template.RecipeSeconds["desktop"])
	share := template.RecipeShare("debian", "desktop")
	if share < 0.3 || share > 0.7 {
		t.Fatalf("debian's share of desktop: %v", share)
	}
	child.waitFor("debian", parent, share)
	parent.add(template.LogEntry{Message: "I: Unpacking the base system..."})
	pct, doing := child.value()
	if want := int(share * 37); pct != want || doing != "debian: debootstrap: unpacking the base system" {
		t.Errorf("while debian builds: %d%% %q, want %d%%", pct, doing, want)
	}
	child.parentDone()
	if pct, _ := child.value(); pct != int(100*share) {
		t.Errorf("once debian is built: %d%%, want %d%%", pct, int(100*share))
	}
}
