package logx

import (
	"io"
	"sync"
)

// Capped writes to w until max bytes went through, then one line saying
// so, then nothing: a log whose lines code it serves can cause (a
// sandbox's agent, writing to a file on the host) cannot fill the disk.
// Writes past the cap report success, so the logger goes on.
func Capped(w io.Writer, max int64) io.Writer {
	return &capped{w: w, left: max}
}

type capped struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
	done bool
}

const cappedNote = "log capped: further lines are dropped\n"

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return len(p), nil
	}
	if int64(len(p)) > c.left {
		c.done = true
		_, err := io.WriteString(c.w, cappedNote)
		return len(p), err
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
