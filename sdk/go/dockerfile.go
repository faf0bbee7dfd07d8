package cove

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Dockerfile is a parsed Dockerfile: a build without its name and sizes.
type Dockerfile struct {
	// From is the FROM reference: a template's name or an image's.
	From     string
	Steps    []TemplateStep
	StartCmd string
	Warnings []string // instructions read but without effect on a sandbox
}

// ParseDockerfile reads the Dockerfile subset Cove builds: FROM, RUN,
// COPY, ADD (of local files), ENV, WORKDIR, USER, ARG and CMD (the start
// command); EXPOSE, LABEL, MAINTAINER, STOPSIGNAL, HEALTHCHECK, SHELL and
// VOLUME are read and ignored with a warning. COPY and ADD sources are
// archived from contextDir: a source may not leave it, neither by ".."
// nor through a symlink, and symlinks are archived as links. args set
// ARG values.
func ParseDockerfile(r io.Reader, contextDir string, args map[string]string) (*Dockerfile, error) {
	lines, err := logicalLines(r)
	if err != nil {
		return nil, err
	}
	df := &Dockerfile{}
	vars := map[string]string{}
	for _, l := range lines {
		keyword, rest, _ := strings.Cut(strings.TrimSpace(l.text), " ")
		keyword = strings.ToUpper(keyword)
		rest = strings.TrimSpace(rest)
		fail := func(format string, a ...any) error {
			return fmt.Errorf("Dockerfile line %d: %s: %s", l.no, keyword, fmt.Sprintf(format, a...))
		}
		if keyword != "ARG" && keyword != "RUN" && keyword != "CMD" {
			rest = expand(rest, vars)
		}
		if keyword != "FROM" && keyword != "ARG" && df.From == "" {
			return nil, fail("the first instruction must be FROM")
		}
		switch keyword {
		case "FROM":
			if df.From != "" {
				return nil, fail("multi-stage builds are not supported")
			}
			f := strings.Fields(rest)
			if len(f) != 1 && !(len(f) == 3 && strings.EqualFold(f[1], "AS")) {
				return nil, fail("want FROM image [AS name]")
			}
			df.From = f[0]
		case "ARG":
			name, def, hasDef := strings.Cut(rest, "=")
			if name == "" || strings.ContainsAny(name, " \t") {
				return nil, fail("want ARG name[=default]")
			}
			if v, ok := args[name]; ok {
				vars[name] = v
			} else if hasDef {
				vars[name] = expand(unquote(def), vars)
			} else {
				vars[name] = ""
			}
		case "RUN":
			cmd, err := shellOrExec(expand(rest, vars))
			if err != nil || cmd == "" {
				return nil, fail("want a command")
			}
			df.Steps = append(df.Steps, TemplateStep{Type: "RUN", Args: []string{cmd}})
		case "CMD":
			cmd, err := shellOrExec(rest)
			if err != nil || cmd == "" {
				return nil, fail("want a command")
			}
			df.StartCmd = cmd
		case "ENV":
			pairs, err := envPairs(rest)
			if err != nil {
				return nil, fail("%v", err)
			}
			for i := 0; i < len(pairs); i += 2 {
				vars[pairs[i]] = pairs[i+1]
			}
			df.Steps = append(df.Steps, TemplateStep{Type: "ENV", Args: pairs})
		case "WORKDIR":
			if rest == "" {
				return nil, fail("want a path")
			}
			df.Steps = append(df.Steps, TemplateStep{Type: "WORKDIR", Args: []string{rest}})
		case "USER":
			if rest == "" || strings.ContainsAny(rest, " \t") {
				return nil, fail("want a user name")
			}
			df.Steps = append(df.Steps, TemplateStep{Type: "USER", Args: []string{rest}})
		case "COPY", "ADD":
			step, err := copyStep(rest, contextDir)
			if err != nil {
				return nil, fail("%v", err)
			}
			df.Steps = append(df.Steps, step)
		case "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "VOLUME":
			df.Warnings = append(df.Warnings, fmt.Sprintf("line %d: %s is ignored", l.no, keyword))
		default:
			return nil, fail("unsupported instruction")
		}
	}
	if df.From == "" {
		return nil, fmt.Errorf("Dockerfile has no FROM")
	}
	return df, nil
}

type line struct {
	no   int
	text string
}

// logicalLines joins continued lines and drops comments and blanks.
func logicalLines(r io.Reader) ([]line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []line
	var cur strings.Builder
	start, no := 0, 0
	for sc.Scan() {
		no++
		t := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimSpace(t)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = no
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(t)
		out = append(out, line{no: start, text: cur.String()})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, line{no: start, text: cur.String()})
	}
	return out, sc.Err()
}

// expand replaces $NAME and ${NAME} of known variables.
func expand(s string, vars map[string]string) string {
	return os.Expand(s, func(name string) string {
		if v, ok := vars[name]; ok {
			return v
		}
		return "${" + name + "}"
	})
}

// shellOrExec turns RUN/CMD arguments into one shell command: the exec
// form ["a", "b c"] is quoted for the shell.
func shellOrExec(s string) (string, error) {
	if !strings.HasPrefix(s, "[") {
		return s, nil
	}
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil {
		return s, nil // not JSON: Docker runs it as shell form too
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " "), nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// envPairs reads "K=V K2="v 2"" or the legacy "K V".
func envPairs(s string) ([]string, error) {
	if k, v, ok := strings.Cut(s, " "); ok && !strings.Contains(k, "=") {
		return []string{k, strings.TrimSpace(v)}, nil
	}
	var out []string
	for _, w := range splitWords(s) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("want NAME=value, got %q", w)
		}
		out = append(out, k, unquote(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("want NAME=value")
	}
	return out, nil
}

// splitWords splits on blanks outside double or single quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			cur.WriteRune(c)
		case c == '"' || c == '\'':
			quote = c
			cur.WriteRune(c)
		case c == ' ' || c == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// copyStep reads COPY/ADD [--chown=u[:g]] [--chmod=mode] src… dest and
// archives the sources. Several sources become one step per source.
func copyStep(rest, contextDir string) (TemplateStep, error) {
	words := splitWords(rest)
	if strings.HasPrefix(rest, "[") {
		if err := json.Unmarshal([]byte(rest), &words); err != nil {
			return TemplateStep{}, fmt.Errorf("bad JSON form: %v", err)
		}
	}
	chown, chmod := "root", "" // Docker's COPY: root's unless --chown
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
		switch k {
		case "chown":
			chown = v
		case "chmod":
			chmod = v
		default:
			return TemplateStep{}, fmt.Errorf("option --%s is not supported", k)
		}
		words = words[1:]
	}
	if len(words) != 2 {
		return TemplateStep{}, fmt.Errorf("want one source and a destination (use one instruction per source)")
	}
	src, dest := words[0], words[1]
	if strings.Contains(src, "://") {
		return TemplateStep{}, fmt.Errorf("remote sources are not supported")
	}
	data, hash, err := ArchiveContext(contextDir, src)
	if err != nil {
		return TemplateStep{}, err
	}
	return TemplateStep{Type: "COPY", Args: []string{src, dest, chown, chmod}, FilesHash: hash, Files: data}, nil
}

// ArchiveContext archives what src (a path in contextDir whose last
// element may be a glob) names, with paths relative to contextDir, and
// returns the tar and its hash. Content, names, modes and link targets
// make the hash; times do not, so an unchanged context hashes the same.
func ArchiveContext(contextDir, src string) ([]byte, string, error) {
	root, err := filepath.Abs(contextDir)
	if err != nil {
		return nil, "", err
	}
	matches, err := MatchContext(root, src)
	if err != nil {
		return nil, "", err
	}
	var files []string
	for _, m := range matches {
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			files = append(files, p)
			return nil
		})
		if err != nil {
			return nil, "", err
		}
	}
	sort.Strings(files)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range files {
		st, err := os.Lstat(p)
		if err != nil {
			return nil, "", err
		}
		link := ""
		if st.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return nil, "", err
			}
		} else if !st.Mode().IsRegular() && !st.IsDir() {
			continue // devices, sockets, fifos
		}
		hdr, err := tar.FileInfoHeader(st, link)
		if err != nil {
			return nil, "", err
		}
		name, _ := filepath.Rel(root, p)
		hdr.Name = filepath.ToSlash(name)
		if st.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time0, time0, time0
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", err
		}
		if st.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return nil, "", err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return nil, "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:]), nil
}

// time0 is the time archived files carry, so their hash is their content's.
var time0 = time.Unix(0, 0)

// MatchContext finds what a COPY source names in a build context: a path
// (its last element may be a glob) that may not leave root, neither by
// ".." nor through a symlink: every directory on the way must be a real
// one. The matches are absolute paths, sorted.
func MatchContext(root, src string) ([]string, error) {
	rel := path.Clean(strings.TrimPrefix(filepath.ToSlash(src), "/"))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("source %s is outside the build context", src)
	}
	if rel == "." {
		return []string{root}, nil
	}
	dir, pattern := path.Split(rel)
	cur := root
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("source %s not found in the build context", src)
		}
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", src, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("source %s goes through %s, which is not a directory (a symlink is not followed)", src, part)
		}
	}
	entries, err := os.ReadDir(cur)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if ok, err := path.Match(pattern, e.Name()); err != nil {
			return nil, fmt.Errorf("source pattern %s: %v", src, err)
		} else if ok {
			out = append(out, filepath.Join(cur, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("source %s not found in the build context", src)
	}
	return out, nil
}
