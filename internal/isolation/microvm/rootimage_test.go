package microvm

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPruneImages: a driver's start removes the layer images whose layer
// is gone or unknown and what an interrupted make left, and keeps the
// others.
func TestPruneImages(t *testing.T) {
	cfg, _ := testDriver(t)
	images := filepath.Join(cfg.Dir, imagesDir)
	if err := os.MkdirAll(images, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := t.TempDir()
	for name, content := range map[string]string{
		"kept.erofs": "", "kept.erofs.layer": kept,
		"gone.erofs": "", "gone.erofs.layer": filepath.Join(kept, "nope"),
		"unknown.erofs": "", "cut.erofs.tmp": "",
	} {
		if err := os.WriteFile(filepath.Join(images, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewDriver(cfg); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(images)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"kept.erofs", "kept.erofs.layer"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
