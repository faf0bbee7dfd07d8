package service

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
)

// LogsKept is how long a sandbox's lifecycle log is kept, past its end.
const LogsKept = 7 * 24 * time.Hour

// Log levels, lowest first: a query's minimum level selects its own and
// those after it.
var logLevels = []string{"debug", "info", "warn", "error"}

// LevelsFrom returns the levels at or above min ("" = all); an unknown
// level is InvalidArgument.
func LevelsFrom(min string) ([]string, error) {
	if min == "" {
		return nil, nil
	}
	i := slices.Index(logLevels, min)
	if i < 0 {
		return nil, errs.New(errs.InvalidArgument, "invalid level %q: one of %s", min, strings.Join(logLevels, ", "))
	}
	return logLevels[i:], nil
}

// logLine appends a line to a sandbox's lifecycle log, with the
// lifecycle events it records (one write: the events cost the operation
// nothing more). The log is a record of what happened, not part of it: a
// failure to write it is logged here and the operation goes on.
func (s *Service) logLine(ctx context.Context, team, id, level, msg string, fields map[string]string, events ...store.Event) {
	l := store.SandboxLog{SandboxID: id, Team: team, Time: time.Now(), Level: level, Message: msg, Fields: fields}
	if err := s.store.AddSandboxLog(context.WithoutCancel(ctx), l, events...); err != nil {
		s.log.Warn("write a sandbox's log", logx.SandboxID(id), logx.Err(err))
		return
	}
	if len(events) > 0 {
		s.webhooks.wake()
	}
}

// Logs returns lines of a team's sandbox's log as q selects them (its
// SandboxID and Team are set here): the lifecycle lines Cove recorded,
// kept LogsKept past the sandbox's end, and while the sandbox is on its
// node the lines its agent logged (processes started and ended, its
// warnings), merged in time order. A sandbox the team never had is
// NotFound.
func (s *Service) Logs(ctx context.Context, team, id string, q store.LogQuery) ([]store.SandboxLog, error) {
	q.SandboxID, q.Team = id, team
	lines, err := s.store.SandboxLogs(ctx, q)
	if err != nil {
		return nil, err
	}
	live := false
	if sb, err := s.store.Sandbox(ctx, id); err == nil && sb.Team == team {
		live = true
		raw, err := s.node.AgentLog(ctx, id)
		switch {
		case err == nil:
			// A warm sandbox's agent logged its warm-up before the sandbox
			// was handed out: not the sandbox's user's.
			agent := slices.DeleteFunc(parseAgentLog(id, team, raw), func(l store.SandboxLog) bool { return !l.Time.IsZero() && l.Time.Before(sb.StartedAt) })
			lines = append(lines, selectLines(agent, q)...)
		case errs.Is(err, errs.NotFound):
		default:
			s.log.Warn("read a sandbox's agent log", logx.SandboxID(id), logx.Err(err))
		}
	}
	if len(lines) == 0 && !live {
		// Nothing selected: is there a log at all?
		some, err := s.store.SandboxLogs(ctx, store.LogQuery{SandboxID: id, Team: team, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(some) == 0 {
			return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
		}
	}
	slices.SortStableFunc(lines, func(a, b store.SandboxLog) int {
		if q.Backward {
			return b.Time.Compare(a.Time)
		}
		return a.Time.Compare(b.Time)
	})
	if q.Limit > 0 && len(lines) > q.Limit {
		lines = lines[:q.Limit]
	}
	return lines, nil
}

// parseAgentLog reads an agent's JSON log lines; lines that are not JSON
// objects (a capped log's last word, say) are kept as their text.
func parseAgentLog(id, team string, raw []byte) []store.SandboxLog {
	var out []store.SandboxLog
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		l := store.SandboxLog{SandboxID: id, Team: team, Level: "info", Fields: map[string]string{"source": "agent"}}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(text, &m); err != nil {
			l.Message = string(text)
			out = append(out, l)
			continue
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) != nil {
				str = string(v)
			}
			switch k {
			case "time":
				l.Time, _ = time.Parse(time.RFC3339Nano, str)
			case "level":
				l.Level = agentLevel(str)
			case "msg":
				l.Message = str
			default:
				l.Fields[k] = str
			}
		}
		out = append(out, l)
	}
	return out
}

// agentLevel maps slog's level names (INFO, WARN+2 …) to the API's.
func agentLevel(s string) string {
	s = strings.ToLower(s)
	for _, l := range slices.Backward(logLevels) {
		if strings.HasPrefix(s, l) {
			return l
		}
	}
	return "info"
}

// selectLines filters lines in memory as the store filters its own.
func selectLines(lines []store.SandboxLog, q store.LogQuery) []store.SandboxLog {
	return slices.DeleteFunc(lines, func(l store.SandboxLog) bool {
		switch {
		case !q.Cursor.IsZero() && !q.Backward && l.Time.Before(q.Cursor),
			!q.Cursor.IsZero() && q.Backward && l.Time.After(q.Cursor),
			len(q.Levels) > 0 && !slices.Contains(q.Levels, l.Level),
			q.Search != "" && !strings.Contains(l.Message, q.Search):
			return true
		}
		return false
	})
}

// createdFields are a new sandbox's lifecycle line's fields.
func createdFields(sb store.Sandbox) map[string]string {
	f := map[string]string{
		"template": cmp.Or(sb.Alias, sb.TemplateID), "templateID": sb.TemplateID, "isolation": sb.Isolation,
		"cpuCount": fmt.Sprint(sb.CPUCount), "memoryMB": fmt.Sprint(sb.MemoryMB), "diskMB": fmt.Sprint(sb.DiskMB),
		"endAt": sb.EndAt.UTC().Format(time.RFC3339),
	}
	if sb.Node != "" {
		f["node"] = sb.Node
	}
	return f
}

// PruneLogs removes lifecycle lines older than LogsKept, then once an
// hour until ctx ends.
func (s *Service) PruneLogs(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := s.store.PruneSandboxLogs(ctx, time.Now().Add(-LogsKept)); err != nil && ctx.Err() == nil {
			s.log.Warn("prune sandbox logs", logx.Err(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
