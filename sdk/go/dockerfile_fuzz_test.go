package cove

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseDockerfile feeds arbitrary Dockerfiles to the parser with a
// build context beside a secret: nothing panics, and no COPY archives
// anything from outside the context (by "..", an absolute path, a glob or
// a symlink) or names an entry that would leave the destination.
func FuzzParseDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM base\nRUN echo hi\n",
		"FROM base\nCOPY app.py /app/\nCOPY src /src\n",
		"FROM base\nCOPY ../secret /x\n",
		"FROM base\nCOPY /etc/passwd /x\n",
		"FROM base\nCOPY link /x\n",
		"FROM base\nCOPY linkdir/secret /x\n",
		"FROM base\nCOPY * /x\n",
		"FROM base\nCOPY --chown=user:user --chmod=755 [\"app.py\", \"/a b\"]\n",
		"FROM base\nARG V=1\nENV A=$V B=\"x y\"\nWORKDIR /w\nUSER user\nCMD [\"python3\", \"-m\", \"http.server\"]\n",
		"FROM base\nRUN a \\\n  b\n# comment\nEXPOSE 80\n",
		"FROM a AS b\nFROM c\n",
		"COPY x y",
		"FROM base\nADD http://example.com/x /x\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	ctx := filepath.Join(dir, "ctx")
	for _, d := range []string{ctx, filepath.Join(ctx, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	const secret = "OUTSIDE-THE-CONTEXT"
	for name, data := range map[string]string{filepath.Join(dir, "secret"): secret, filepath.Join(ctx, "app.py"): "print(1)", filepath.Join(ctx, "src/x"): "x"} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink("../secret", filepath.Join(ctx, "link")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(ctx, "linkdir")); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		df, err := ParseDockerfile(strings.NewReader(text), ctx, map[string]string{"V": "2"})
		if err != nil {
			return
		}
		for _, st := range df.Steps {
			if st.Type != "COPY" {
				continue
			}
			if bytes.Contains(st.Files, []byte(secret)) {
				t.Fatalf("%q: a COPY archived the file outside the context", text)
			}
			tr := tar.NewReader(bytes.NewReader(st.Files))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%q: a COPY's archive is unreadable: %v", text, err)
				}
				name := filepath.Clean(h.Name)
				if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
					t.Fatalf("%q: a COPY's archive names %q", text, h.Name)
				}
			}
		}
	})
}
