package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestOperationsFlagTable: docs/OPERATIONS.md's table of server flags
// lists every flag of cove server, cove api and cove node, with the
// environment variable its help names, and no flag none of them has.
func TestOperationsFlagTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	// A row: | `--a`, `--b` | `COVE_A`, `COVE_B` (or a prefix: `COVE_X_…`) | what |
	row := regexp.MustCompile("(?m)^\\| (`--[^|]*) \\|\\s*([^|]*?)\\s*\\|")
	name := regexp.MustCompile("`--([a-z0-9-]+)`")
	variable := regexp.MustCompile("`(COVE_[A-Z0-9_]+)(…)?`")
	table := map[string][]string{} // flag → the environment variables its row names
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var vars []string
		for _, v := range variable.FindAllStringSubmatch(m[2], -1) {
			vars = append(vars, v[1]+v[2])
		}
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			table[n[1]] = vars
		}
	}
	if len(table) == 0 {
		t.Fatal("docs/OPERATIONS.md has no flag table")
	}
	named := func(vars []string, v string) bool {
		return slices.ContainsFunc(vars, func(d string) bool {
			prefix, cut := strings.CutSuffix(d, "…")
			return d == v || cut && strings.HasPrefix(v, prefix)
		})
	}
	env := regexp.MustCompile(`\((COVE_[A-Z0-9_]+)[;)]`)
	have := map[string]bool{}
	for _, cmd := range []*cobra.Command{serverCmd(), apiCmd(), nodeCmd()} {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			have[f.Name] = true
			vars, ok := table[f.Name]
			if !ok {
				t.Errorf("cove %s --%s is not in docs/OPERATIONS.md's table", cmd.Name(), f.Name)
				return
			}
			if m := env.FindStringSubmatch(f.Usage); m != nil && !named(vars, m[1]) {
				t.Errorf("--%s: the table names %v, its help %s", f.Name, vars, m[1])
			}
		})
	}
	for name := range table {
		if !have[name] {
			t.Errorf("docs/OPERATIONS.md's table has --%s, which no command has", name)
		}
	}
}
