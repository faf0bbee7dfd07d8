package process

import (
	"os"
	"testing"
	"time"
)

// A reader cut off by a passed deadline still gets what the pipe holds.
func TestDrainAfterDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // held open, as by a background child
	if _, err := w.Write([]byte("buffered output")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	drain(r, make([]byte, 4), func(b []byte) { got = append(got, b...) })
	if string(got) != "buffered output" {
		t.Errorf("drained %q", got)
	}
}
