package process

import (
	"strings"
	"testing"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

func TestCommandLine(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
		want string
	}{
		{"E2B's login shell", "/bin/bash", []string{"-l", "-c", "python3 app.py --port 8000"}, "/bin/bash -l -c python3 app.py --port 8000"},
		{"plain words", "ls", []string{"-la", "/tmp"}, "ls -la /tmp"},
		{"a shell's script as it is", "sh", []string{"-c", `echo 'hi' "there"`}, `sh -c echo 'hi' "there"`},
		{"a quote inside", "grep", []string{"it's", "f"}, `grep 'it'\''s' f`},
		{"an empty script", "sh", []string{"-c", ""}, "sh -c ''"},
		{"an empty argument", "printf", []string{""}, "printf ''"},
		{"cut when long", "/bin/bash", []string{"-c", long}, "/bin/bash -c " + long[:maxLoggedCmd-len("/bin/bash -c ")] + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandLine(&pb.ProcessConfig{Cmd: tc.cmd, Args: tc.args}); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
