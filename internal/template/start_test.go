package template

import "testing"

// TestStartCommands: a template keeps the start and ready commands of the
// template it is built on unless it gives its own start command, which
// replaces both.
func TestStartCommands(t *testing.T) {
	t.Parallel()
	ci := parentStart{Name: "code-interpreter-v1", StartCmd: CodeInterpreterStart, ReadyCmd: CodeInterpreterReady}
	for _, c := range []struct {
		name               string
		spec               Spec
		parent             parentStart
		wantStart, wantRdy string
	}{
		{"none anywhere", Spec{}, parentStart{Name: "base"}, "", ""},
		{"its own over none", Spec{StartCmd: "app", ReadyCmd: "check"}, parentStart{Name: "base"}, "app", "check"},
		{"the parent's", Spec{}, ci, CodeInterpreterStart, CodeInterpreterReady},
		{"the parent's with its own ready command", Spec{ReadyCmd: "check"}, ci, CodeInterpreterStart, "check"},
		{"its own replaces both", Spec{StartCmd: "app"}, ci, "app", ""},
		{"its own with its ready command", Spec{StartCmd: "app", ReadyCmd: "check"}, ci, "app", "check"},
	} {
		start, ready := startCommands(c.spec, c.parent)
		if start != c.wantStart || ready != c.wantRdy {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, start, ready, c.wantStart, c.wantRdy)
		}
	}
}
