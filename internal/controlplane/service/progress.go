package service

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/covesandbox/cove/internal/template"
)

// progress estimates how far a build has come from the lines of its log:
// the steps it finished, weighted by how long each takes, and inside the
// current one what debootstrap and apt-get say of their work. It is an
// estimate for people (a percentage and what runs now), never a state the
// build depends on.
type progress struct {
	mu      sync.Mutex
	weights []float64 // [0] the base (debootstrap, an image, a template), then each step; they sum to 1
	steps   []string  // what each step does, for the label
	cur     int       // the step running now (0: the base)
	within  float64   // how much of it is done, 0..1
	label   string    // what it does now
	apt     aptCount
	// parent, while the build waits for a recipe it starts from, is that
	// recipe's build; share is its part of the whole.
	parent     *progress
	parentName string
	share      float64
}

// aptCount follows one apt-get install in a step's output.
type aptCount struct {
	total, fetched, unpacked, setUp int
}

// newProgress weighs a build's base and steps: by seconds measured where
// known (template.RecipeSeconds), else alike, commands and copies one
// each, the rest nearly nothing.
func newProgress(spec template.Spec, seconds []float64) *progress {
	p := &progress{weights: make([]float64, len(spec.Steps)+1), steps: make([]string, len(spec.Steps)+1), label: "starting"}
	p.steps[0] = "the base"
	if len(seconds) == len(p.weights) {
		copy(p.weights, seconds)
	} else {
		p.weights[0] = 1
		for i, s := range spec.Steps {
			switch strings.ToUpper(s.Type) {
			case "RUN", "COPY", "ADD":
				p.weights[i+1] = 1
			default:
				p.weights[i+1] = 0.01
			}
		}
	}
	for i, s := range spec.Steps {
		p.steps[i+1] = fmt.Sprintf("step %d of %d: %s", i+1, len(spec.Steps), describeStep(s))
	}
	var sum float64
	for _, w := range p.weights {
		sum += w
	}
	for i := range p.weights {
		p.weights[i] /= sum
	}
	return p
}

// describeStep is a step in a few words: an apt-get install by the
// packages it installs, anything else by its text.
func describeStep(s template.Step) string {
	text := strings.ToUpper(s.Type) + " " + strings.Join(s.Args, " ")
	if _, after, ok := strings.Cut(text, "apt-get install "); ok && strings.ToUpper(s.Type) == "RUN" {
		after, _, _ = strings.Cut(after, "&&")
		var pkgs []string
		words := strings.Fields(after)
		for i := 0; i < len(words); i++ {
			switch w := words[i]; {
			case w == "-o" || w == "-t": // an option with its value
				i++
			case !strings.HasPrefix(w, "-"):
				pkgs = append(pkgs, w)
			}
		}
		text = "installing " + strings.Join(pkgs, " ")
	}
	if strings.Contains(text, "pip install") && strings.ToUpper(s.Type) == "RUN" { // a recipe's, its lock in a here-document
		text = fmt.Sprintf("installing %d Python packages (pip)", strings.Count(text, "=="))
	}
	text, _, _ = strings.Cut(text, "\n")
	if len(text) > 60 {
		text = text[:57] + "…"
	}
	return text
}

// debootstrap's stages as the share of its run each begins at (measured:
// bookworm minbase with the debian recipe's packages, on 2 cores).
var debootstrapStages = []struct {
	prefix string
	at     float64
	label  string
}{
	{"I: Retrieving InRelease", 0.00, "debootstrap: fetching the archive's index"},
	{"I: Retrieving Packages", 0.01, "debootstrap: fetching the archive's index"},
	{"I: Resolving dependencies", 0.03, "debootstrap: resolving packages"},
	{"I: Checking component", 0.15, "debootstrap: resolving packages"},
	{"I: Retrieving ", 0.18, "debootstrap: downloading packages"},
	{"I: Extracting ", 0.39, "debootstrap: extracting the essential packages"},
	{"I: Installing core packages", 0.45, "debootstrap: installing the core"},
	{"I: Unpacking required packages", 0.47, "debootstrap: unpacking the required packages"},
	{"I: Configuring required packages", 0.54, "debootstrap: configuring the required packages"},
	{"I: Unpacking the base system", 0.56, "debootstrap: unpacking the base system"},
	{"I: Configuring the base system", 0.95, "debootstrap: configuring the base system"},
	{"I: Base system installed successfully", 0.99, "debootstrap: storing the layer"},
}

var aptNew = regexp.MustCompile(`^(\d+) upgraded, (\d+) newly installed`)

// add takes a line of the build's log.
func (p *progress) add(e template.LogEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Final {
		return
	}
	if e.Step != "" {
		n, err := strconv.Atoi(e.Step)
		if err != nil || n < 1 || n >= len(p.weights) {
			return
		}
		if n != p.cur {
			p.cur, p.within, p.apt, p.label = n, 0, aptCount{}, p.steps[n]
			if strings.HasPrefix(e.Message, "CACHED ") {
				p.within = 1
			}
			return
		}
		p.aptLine(e.Message)
		return
	}
	if p.cur > 0 { // after the steps: the start check
		p.within, p.label = 1, "checking that its start command starts"
		return
	}
	for _, s := range debootstrapStages {
		if strings.HasPrefix(e.Message, s.prefix) && (s.at > p.within || s.at == 0 && p.within == 0) {
			p.within, p.label = s.at, s.label
			return
		}
	}
	// A package fetched, extracted, unpacked or configured: a little
	// further, short of the next stage.
	for _, verb := range []string{"I: Retrieving ", "I: Extracting ", "I: Unpacking ", "I: Configuring "} {
		if strings.HasPrefix(e.Message, verb) {
			next := 1.0
			for _, s := range debootstrapStages {
				if s.at > p.within {
					next = s.at
					break
				}
			}
			p.within = min(p.within+0.003, max(next-0.01, p.within))
			return
		}
	}
}

// aptLine moves the current step on by what apt-get said.
func (p *progress) aptLine(line string) {
	a := &p.apt
	switch {
	case aptNew.MatchString(line):
		m := aptNew.FindStringSubmatch(line)
		a.total, _ = strconv.Atoi(m[2])
	case a.total == 0:
		return
	case strings.HasPrefix(line, "Get:"):
		a.fetched++
	case strings.HasPrefix(line, "Unpacking "):
		a.unpacked++
	case strings.HasPrefix(line, "Setting up "):
		a.setUp++
	default:
		return
	}
	if a.total > 0 {
		t := float64(a.total)
		p.within = min(0.05+0.15*min(float64(a.fetched)/t, 1)+0.8*min(float64(a.unpacked+a.setUp)/(2*t), 1), 0.99)
		switch {
		case a.unpacked == 0:
			p.label = fmt.Sprintf("%s (apt: %d of %d packages downloaded)", p.steps[p.cur], a.fetched, a.total)
		case a.setUp == 0:
			p.label = fmt.Sprintf("%s (apt: %d of %d packages unpacked)", p.steps[p.cur], a.unpacked, a.total)
		default:
			p.label = fmt.Sprintf("%s (apt: %d of %d packages set up)", p.steps[p.cur], a.setUp, a.total)
		}
	}
}

// value is the build's percentage done and what it does now.
func (p *progress) value() (int, string) {
	p.mu.Lock()
	parent, name, share := p.parent, p.parentName, p.share
	var done float64
	for i := range p.cur {
		done += p.weights[i]
	}
	done += p.weights[p.cur] * p.within
	label := p.label
	p.mu.Unlock()
	if parent != nil {
		pv, pl := parent.value()
		return int(share * float64(pv)), name + ": " + pl
	}
	if share > 0 {
		done = share + (1-share)*done
	}
	return min(int(100*done), 99), label
}

// waitFor makes the build's progress that of parent, a recipe it starts
// from, until it is done: share of the whole is parent's.
func (p *progress) waitFor(name string, parent *progress, share float64) {
	p.mu.Lock()
	p.parent, p.parentName, p.share = parent, name, share
	p.mu.Unlock()
}

// parentDone: the recipe the build starts from is built; its own steps
// fill the rest.
func (p *progress) parentDone() {
	p.mu.Lock()
	p.parent = nil
	p.mu.Unlock()
}
