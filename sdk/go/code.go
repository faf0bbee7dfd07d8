package cove

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// codeInterpreterPort is the code interpreter's port in a sandbox.
const codeInterpreterPort = "49999"

// CodeInterpreter runs code in stateful contexts (Python, JavaScript,
// TypeScript, R, Java, Bash): the server of port 49999 that
// code-interpreter-v1 starts, as @e2b/code-interpreter uses it.
type CodeInterpreter struct {
	s    *Sandbox
	http *http.Client
}

// CodeContext is a context: a kernel of one language in a directory.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// RunCodeOptions say where and how code runs; zero values run Python in
// its default context.
type RunCodeOptions struct {
	Language string       // python (default), javascript/js, typescript/ts, r, java, bash
	Context  *CodeContext // a context made with CreateContext; not with Language
	Envs     map[string]string
	// Callbacks, called as the output comes.
	OnStdout func(OutputMessage)
	OnStderr func(OutputMessage)
	OnResult func(Result)
	OnError  func(ExecutionError)
}

// OutputMessage is a piece of output.
type OutputMessage struct {
	Line      string
	Timestamp time.Time
	Error     bool // stderr
}

// ExecutionError is an exception raised by the code.
type ExecutionError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func (e *ExecutionError) Error() string { return e.Name + ": " + e.Value }

// Result is something the code displayed, or the value of its last
// expression (IsMainResult), in every format the kernel gave.
type Result struct {
	IsMainResult bool                       `json:"is_main_result"`
	Text         string                     `json:"text,omitempty"`
	HTML         string                     `json:"html,omitempty"`
	Markdown     string                     `json:"markdown,omitempty"`
	SVG          string                     `json:"svg,omitempty"`
	PNG          string                     `json:"png,omitempty"` // base64
	JPEG         string                     `json:"jpeg,omitempty"`
	PDF          string                     `json:"pdf,omitempty"`
	LaTeX        string                     `json:"latex,omitempty"`
	JSON         json.RawMessage            `json:"json,omitempty"`
	JavaScript   string                     `json:"javascript,omitempty"`
	Data         map[string]any             `json:"data,omitempty"`  // a DataFrame's columns
	Chart        *Chart                     `json:"chart,omitempty"` // read out of a figure
	Extra        map[string]json.RawMessage `json:"extra,omitempty"` // other MIME types
}

// Chart is what a figure shows: its type (line, scatter, bar, pie,
// box_and_whisker, superchart or unknown), axes and elements.
type Chart struct {
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	XLabel      string         `json:"x_label,omitempty"`
	YLabel      string         `json:"y_label,omitempty"`
	XUnit       string         `json:"x_unit,omitempty"`
	YUnit       string         `json:"y_unit,omitempty"`
	XScale      string         `json:"x_scale,omitempty"`
	YScale      string         `json:"y_scale,omitempty"`
	XTicks      []any          `json:"x_ticks,omitempty"`
	YTicks      []any          `json:"y_ticks,omitempty"`
	XTickLabels []string       `json:"x_tick_labels,omitempty"`
	YTickLabels []string       `json:"y_tick_labels,omitempty"`
	Elements    []ChartElement `json:"elements"`
}

// ChartElement is one element of a chart; which fields it has depends on
// the chart's type (a superchart's elements are charts).
type ChartElement struct {
	Label string `json:"label"`
	// line and scatter: the points, numbers or (dates, categories) strings
	Points [][2]any `json:"points,omitempty"`
	// bar
	Group string `json:"group,omitempty"`
	Value any    `json:"value,omitempty"`
	// pie
	Angle  float64 `json:"angle,omitempty"`
	Radius float64 `json:"radius,omitempty"`
	// box_and_whisker
	Min           float64   `json:"min,omitempty"`
	FirstQuartile float64   `json:"first_quartile,omitempty"`
	Median        float64   `json:"median,omitempty"`
	ThirdQuartile float64   `json:"third_quartile,omitempty"`
	Max           float64   `json:"max,omitempty"`
	Outliers      []float64 `json:"outliers,omitempty"`
	// superchart
	*Chart
}

// Logs are the code's output, piece by piece.
type Logs struct {
	Stdout []string
	Stderr []string
}

// Execution is what running code gave.
type Execution struct {
	Results        []Result
	Logs           Logs
	Error          *ExecutionError // nil when the code raised nothing
	ExecutionCount int
}

// Text is the text of the main result ("" without one).
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// RunCode runs code and returns what it gave; an exception in the code is
// Execution.Error, not an error. ctx bounds the execution: when it ends,
// the code is interrupted and the context keeps its state.
func (c *CodeInterpreter) RunCode(ctx context.Context, code string, opts RunCodeOptions) (*Execution, error) {
	if opts.Context != nil && opts.Language != "" {
		return nil, fmt.Errorf("%w: a context and a language: give one", ErrInvalidArgument)
	}
	body := map[string]any{"code": code}
	if opts.Context != nil {
		body["context_id"] = opts.Context.ID
	}
	if opts.Language != "" {
		body["language"] = opts.Language
	}
	if opts.Envs != nil {
		body["env_vars"] = opts.Envs
	}
	resp, err := c.do(ctx, http.MethodPost, "/execute", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	exec := &Execution{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		if err := exec.add(sc.Bytes(), &opts); err != nil {
			return exec, err
		}
	}
	if err := sc.Err(); err != nil {
		return exec, fmt.Errorf("run code: %w", err)
	}
	return exec, nil
}

// add takes one line of the stream.
func (e *Execution) add(line []byte, opts *RunCodeOptions) error {
	var head struct {
		Type           string    `json:"type"`
		Text           string    `json:"text"`
		Timestamp      time.Time `json:"timestamp"`
		ExecutionCount int       `json:"execution_count"`
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("run code: a line of the stream: %w", err)
	}
	switch head.Type {
	case "stdout", "stderr":
		msg := OutputMessage{Line: head.Text, Timestamp: head.Timestamp, Error: head.Type == "stderr"}
		if msg.Error {
			e.Logs.Stderr = append(e.Logs.Stderr, head.Text)
			if opts.OnStderr != nil {
				opts.OnStderr(msg)
			}
		} else {
			e.Logs.Stdout = append(e.Logs.Stdout, head.Text)
			if opts.OnStdout != nil {
				opts.OnStdout(msg)
			}
		}
	case "result":
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("run code: a result: %w", err)
		}
		e.Results = append(e.Results, r)
		if opts.OnResult != nil {
			opts.OnResult(r)
		}
	case "error":
		var x ExecutionError
		if err := json.Unmarshal(line, &x); err != nil {
			return fmt.Errorf("run code: an error: %w", err)
		}
		e.Error = &x
		if opts.OnError != nil {
			opts.OnError(x)
		}
	case "number_of_executions":
		e.ExecutionCount = head.ExecutionCount
	}
	return nil
}

// CodeContextOptions describe a new context; zero values are Python in
// the user's home.
type CodeContextOptions struct {
	Language string
	Cwd      string
}

// CreateContext starts a context.
func (c *CodeInterpreter) CreateContext(ctx context.Context, opts CodeContextOptions) (*CodeContext, error) {
	body := map[string]any{}
	if opts.Language != "" {
		body["language"] = opts.Language
	}
	if opts.Cwd != "" {
		body["cwd"] = opts.Cwd
	}
	var out CodeContext
	if err := c.call(ctx, http.MethodPost, "/contexts", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListContexts returns the contexts, oldest first.
func (c *CodeInterpreter) ListContexts(ctx context.Context) ([]CodeContext, error) {
	var out []CodeContext
	err := c.call(ctx, http.MethodGet, "/contexts", nil, &out)
	return out, err
}

// RestartContext gives the context a fresh kernel (its state is lost).
func (c *CodeInterpreter) RestartContext(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/contexts/"+url.PathEscape(id)+"/restart", nil, nil)
}

// RemoveContext ends the context.
func (c *CodeInterpreter) RemoveContext(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/contexts/"+url.PathEscape(id), nil, nil)
}

func (c *CodeInterpreter) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// do sends a request to the code interpreter; an answer that is not 200 is
// an *APIError.
func (c *CodeInterpreter) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.s.client.sandboxURL+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, apiError(resp)
	}
	return resp, nil
}
