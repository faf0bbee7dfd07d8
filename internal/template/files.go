package template

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/covesandbox/cove/internal/errs"
)

// FileSum is a file of a saved state and its SHA-256.
type FileSum struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ProcessImage is a copy of a sandbox's running processes — their memory and
// kernel state, a driver's image (isolation.Cloner) — that new sandboxes
// run on from: a fork's children, or sandboxes created from a snapshot.
type ProcessImage struct {
	// Dir is where the image is (a snapshot's record names it by Name
	// under the store instead).
	Dir   string    `json:"-"`
	Name  string    `json:"name,omitempty"`
	Files []FileSum `json:"files"`
	// Driver made it; only it can run it.
	Driver string `json:"driver"`
	// Token is the source's agent token: a copy's agent has it until the
	// node gives it the copy's own. Records are readable by root only.
	Token string `json:"token,omitempty"`
	// Blob, in a cluster, is the SHA-256 of its archive in the object
	// store, where a node that lacks it fetches it.
	Blob string `json:"blob,omitempty"`
}

// Bytes is the size of the image's files.
func (img *ProcessImage) Bytes() int64 {
	var n int64
	for _, f := range img.Files {
		n += f.Size
	}
	return n
}

// SumFiles lists a directory tree's regular files with their SHA-256.
func SumFiles(dir string) ([]FileSum, error) {
	var out []FileSum
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, FileSum{Name: rel, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// VerifyFiles checks a directory against its manifest: every file there,
// of its size and digest, and no other.
func VerifyFiles(dir string, want []FileSum) error {
	got, err := SumFiles(dir)
	if err != nil {
		return errs.New(errs.DataLoss, "saved state %s cannot be read: %v", dir, err)
	}
	if len(got) != len(want) {
		return errs.New(errs.DataLoss, "saved state %s is incomplete: %d files, the manifest lists %d", dir, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return errs.New(errs.DataLoss, "saved state %s is damaged: %s is %d bytes with digest %.16s, the manifest says %d bytes, %.16s",
				dir, want[i].Name, got[i].Size, got[i].SHA256, want[i].Size, want[i].SHA256)
		}
	}
	return nil
}
