package testutil

import (
	"os"
	"strings"
	"testing"
)

// DocBlock is the fenced block a document (README.md, docs/GUIDE.md)
// marks with the comment `<!-- name -->` on the line before it: its
// fence's language and its text.
func DocBlock(t testing.TB, path, name string) (lang, text string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- "+name+" -->\n```")
	if !ok {
		t.Fatalf("%s has no block marked %s", path, name)
	}
	lang, rest, _ = strings.Cut(rest, "\n")
	text, _, _ = strings.Cut(rest, "```")
	return lang, text
}
