package logx

import (
	"bytes"
	"strings"
	"testing"
)

// TestCapped: lines pass until the cap, then one note, then nothing, and
// the writer still reports success.
func TestCapped(t *testing.T) {
	var buf bytes.Buffer
	w := Capped(&buf, 25)
	for i := range 10 {
		n, err := w.Write([]byte("0123456789\n"))
		if err != nil || n != 11 {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	if want := "0123456789\n0123456789\n" + cappedNote; buf.String() != want {
		t.Errorf("wrote %q, want %q", buf.String(), want)
	}
	if strings.Count(buf.String(), "capped") != 1 {
		t.Error("the note more than once")
	}
}
