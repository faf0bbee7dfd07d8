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
			s.line(result(c.Data, m.Header.MsgType == "execute_result"))
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
