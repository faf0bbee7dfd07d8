package cli

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// logsPoll is how often `sandbox logs -f` asks for new lines; logsPage
// the server's default page.
const (
	logsPoll = time.Second
	logsPage = 1000
)

func sandboxLogsCmd() *cobra.Command {
	var (
		follow        bool
		level, search string
		limit         int
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "logs SANDBOX",
		Short: "Show a sandbox's log: its life (kept after it ends) and its agent's lines",
		Long: "Show a sandbox's log: what Cove recorded of its life (created, paused, resumed,\n" +
			"killed, ended; kept for 7 days after it ends) and, while it runs, its agent's\n" +
			"lines (processes started and ended). With -f, wait for new lines until the\n" +
			"sandbox is gone.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			id, w := args[0], cmd.OutOrStdout()
			opts := cove.LogOptions{Level: level, Search: search, Limit: limit}
			seen := map[string]bool{} // lines of the last millisecond printed
			for {
				lines, err := c.Logs(cmd.Context(), id, opts)
				if err != nil {
					return explain(c, err, id)
				}
				for _, l := range lines {
					key := logKey(l)
					if seen[key] {
						continue
					}
					if ms := l.Time.Truncate(time.Millisecond); !ms.Equal(opts.Since) {
						opts.Since, seen = ms, map[string]bool{}
					}
					seen[key] = true
					if err := printLog(w, l, asJSON); err != nil {
						return err
					}
				}
				if !follow {
					return nil
				}
				if len(lines) >= cmp.Or(limit, logsPage) {
					continue // more at once
				}
				// Caught up: go on while the sandbox is there.
				if _, err := c.Info(cmd.Context(), id); errors.Is(err, cove.ErrNotFound) {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(logsPoll):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "wait for new lines until the sandbox is gone")
	cmd.Flags().StringVar(&level, "level", "", "the lowest level shown: debug, info, warn or error")
	cmd.Flags().StringVar(&search, "search", "", "only lines whose message holds this (case-sensitive)")
	cmd.Flags().IntVar(&limit, "limit", 0, "lines per request (0: the server's default, 1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each line as a JSON object")
	return cmd
}

// logKey names a line among those of its millisecond.
func logKey(l cove.LogEntry) string {
	var b strings.Builder
	b.WriteString(l.Time.Format(time.RFC3339Nano) + "\x00" + l.Level + "\x00" + l.Message)
	for _, k := range slices.Sorted(maps.Keys(l.Fields)) {
		b.WriteString("\x00" + k + "=" + l.Fields[k])
	}
	return b.String()
}

// commandField is the field of the agent's lines that holds a process's
// command line: shown last and as it is (it runs to the line's end), as
// the dashboard shows it, not quoted again.
const commandField = "cmd"

func printLog(w io.Writer, l cove.LogEntry, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(l)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-5s %s", l.Time.Local().Format("2006-01-02 15:04:05.000"), strings.ToUpper(l.Level), l.Message)
	for _, k := range slices.Sorted(maps.Keys(l.Fields)) {
		if k == commandField {
			continue
		}
		v := l.Fields[k]
		if v == "" || strings.ContainsAny(v, " \"=") {
			v = strconv.Quote(v)
		}
		b.WriteString(" " + k + "=" + v)
	}
	if v, ok := l.Fields[commandField]; ok {
		b.WriteString(" " + commandField + "=" + strings.ReplaceAll(v, "\n", `\n`))
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}
