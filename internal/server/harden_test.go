package server_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileLimitRaised: a started server may hold as many descriptors as
// the kernel allows a process (fs.nr_open) where it may raise its hard
// limit (CAP_SYS_RESOURCE), else as many as its hard limit: its egress
// proxy's bound is a share of that limit.
func TestFileLimitRaised(t *testing.T) {
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	start(t)
	want := before.Max
	if mayRaise(t) {
		b, err := os.ReadFile("/proc/sys/fs/nr_open")
		if err != nil {
			t.Fatal(err)
		}
		want, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	var got unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != want || got.Max != want {
		t.Errorf("RLIMIT_NOFILE = %d (hard %d), want %d (from %d, hard %d)", got.Cur, got.Max, want, before.Cur, before.Max)
	}
}

// mayRaise says whether this process has CAP_SYS_RESOURCE.
func mayRaise(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, _ := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}
