package cli

import (
	"strings"
	"testing"
	"time"

	cove "github.com/covesandbox/cove/sdk/go"
)

// A log line reads as the dashboard shows it: fields sorted, quoted where
// they hold spaces, the command line last and as it is.
func TestPrintLog(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	stamp := at.Local().Format("2006-01-02 15:04:05.000")
	for _, tc := range []struct {
		name   string
		fields map[string]string
		want   string
	}{
		{"a process", map[string]string{"pid": "12", "status": "exit status 0", "cmd": `/bin/bash -l -c python3 -c "print(6*7)"`},
			`INFO  process ended pid=12 status="exit status 0" cmd=/bin/bash -l -c python3 -c "print(6*7)"`},
		{"a script of lines", map[string]string{"cmd": "sh -c a\nb"}, `INFO  process ended cmd=sh -c a\nb`},
		{"no command", map[string]string{"reason": "", "detail": "a=b"}, `INFO  process ended detail="a=b" reason=""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := printLog(&b, cove.LogEntry{Time: at, Level: "info", Message: "process ended", Fields: tc.fields}, false); err != nil {
				t.Fatal(err)
			}
			if want := stamp + " " + tc.want + "\n"; b.String() != want {
				t.Errorf("got  %q\nwant %q", b.String(), want)
			}
		})
	}
}
