package codeinterp

import (
	"encoding/json"
	"strings"
)

// mimeFields maps the MIME types of a Jupyter display to the fields of an
// E2B result; others go to its "extra".
var mimeFields = map[string]string{
	"text/plain":             "text",
	"text/html":              "html",
	"text/markdown":          "markdown",
	"image/svg+xml":          "svg",
	"image/png":              "png",
	"image/jpeg":             "jpeg",
	"application/pdf":        "pdf",
	"text/latex":             "latex",
	"application/json":       "json",
	"application/javascript": "javascript",
	"e2b/data":               "data",
	"e2b/chart":              "chart",
}

// message writes what a kernel message means for the client: output,
// a result or an error.
func (s *stream) message(m message) {
	switch m.Header.MsgType {
	case "stream":
		var c struct {
			Name string `json:"name"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			name := "stdout"
			if c.Name == "stderr" {
				name = "stderr"
			}
			s.output(name, c.Text)
		}
	case "execute_result", "display_data":
		var c struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			s.result(result(c.Data, m.Header.MsgType == "execute_result"), c.Data)
		}
	case "error":
		var c struct {
			EName     string   `json:"ename"`
			EValue    string   `json:"evalue"`
			Traceback []string `json:"traceback"`
		}
		if json.Unmarshal(m.Content, &c) == nil {
			s.line(map[string]any{"type": "error", "name": c.EName, "value": c.EValue, "traceback": strings.Join(c.Traceback, "\n")})
		}
	}
}

// result writes a result line, holding a displayed value back where the
// kernel shows values as displays (stream.valuesDisplayed) until the next
// value or the end. A plot does not end the hold: IRkernel sends a cell's
// plots when it ends, after its values.
func (s *stream) result(r map[string]any, data map[string]json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.valuesDisplayed || !isValue(data) {
		s.writeLocked(r)
		return
	}
	if s.held != nil {
		s.writeLocked(s.held)
	}
	s.held = r
}

// endValues writes the value held back, if any, as the main result.
func (s *stream) endValues() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != nil {
		s.held["is_main_result"] = true
		s.writeLocked(s.held)
		s.held = nil
	}
}

// isValue says whether a display shows a value (text, a table) rather
// than a plot: it carries no image.
func isValue(data map[string]json.RawMessage) bool {
	for _, mime := range []string{"image/png", "image/jpeg", "image/svg+xml", "application/pdf"} {
		if _, ok := data[mime]; ok {
			return false
		}
	}
	return true
}

// result is the E2B result line of a display's MIME bundle.
func result(data map[string]json.RawMessage, main bool) map[string]any {
	out := map[string]any{"type": "result", "is_main_result": main}
	extra := map[string]json.RawMessage{}
	for mime, v := range data {
		field, ok := mimeFields[mime]
		if !ok {
			extra[mime] = v
			continue
		}
		if field == "text" {
			var text string
			if json.Unmarshal(v, &text) == nil {
				out[field] = unquote(text)
				continue
			}
		}
		out[field] = v
	}
	if len(extra) > 0 {
		out["extra"] = extra
	}
	return out
}

// unquote strips the quotes a string's repr has ('a' → a), as E2B does.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] && !strings.ContainsRune(s[1:len(s)-1], rune(s[0])) {
		return s[1 : len(s)-1]
	}
	return s
}

// dedent removes the indentation every non-blank line of code shares (code
// often comes indented inside a template string).
func dedent(code string) string {
	lines := strings.Split(code, "\n")
	prefix, first := "", true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ws := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = ws, false
			continue
		}
		for !strings.HasPrefix(ws, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if prefix == "" {
		return code
	}
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = strings.TrimLeft(l, " \t")
			continue
		}
		lines[i] = l[len(prefix):]
	}
	return strings.Join(lines, "\n")
}
