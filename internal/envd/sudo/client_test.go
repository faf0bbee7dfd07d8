package sudo

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args []string
		want Request
		exit bool // parse ends the command (help, version, an error)
	}{
		{[]string{"apt-get", "install", "-y", "jq"}, Request{Argv: []string{"apt-get", "install", "-y", "jq"}}, false},
		{[]string{"-u", "user", "id"}, Request{User: "user", Argv: []string{"id"}}, false},
		{[]string{"-uuser", "id"}, Request{User: "user", Argv: []string{"id"}}, false},
		{[]string{"--user=user", "id"}, Request{User: "user", Argv: []string{"id"}}, false},
		{[]string{"-En", "env"}, Request{KeepEnv: true, Argv: []string{"env"}}, false},
		{[]string{"-i"}, Request{Login: true, Argv: []string{}}, false},
		{[]string{"-s", "echo", "hi"}, Request{Shell: true, Argv: []string{"echo", "hi"}}, false},
		{[]string{"A=1", "B=2", "env"}, Request{Set: map[string]string{"A": "1", "B": "2"}, Argv: []string{"env"}}, false},
		{[]string{"--", "-weird"}, Request{Argv: []string{"-weird"}}, false},
		{[]string{"-H", "--preserve-env=PATH", "ls"}, Request{KeepEnv: true, Argv: []string{"ls"}}, false},
		{[]string{}, Request{}, true},
		{[]string{"-u"}, Request{}, true},
		{[]string{"-x", "ls"}, Request{}, true},
		{[]string{"-v"}, Request{}, true},
		{[]string{"-V"}, Request{}, true},
	}
	for _, tc := range tests {
		got, _, done := parse(tc.args)
		if done != tc.exit || (!done && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("parse(%q) = %+v, done %v; want %+v, done %v", tc.args, got, done, tc.want, tc.exit)
		}
	}
}
