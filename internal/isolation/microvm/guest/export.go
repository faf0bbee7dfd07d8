package guest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Export frames: chunks of the archive, each a 4-byte big-endian length
// and its bytes; a zero length ends them, followed by an outcome: a
// 4-byte length and the guest's error (none: the archive is whole).
const maxFrame = 1 << 20

// frameWriter writes each Write as one frame.
type frameWriter struct{ w io.Writer }

func (f frameWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		n := min(len(p), maxFrame)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(n))
		if _, err := f.w.Write(hdr[:]); err != nil {
			return 0, err
		}
		if _, err := f.w.Write(p[:n]); err != nil {
			return 0, err
		}
		p = p[n:]
	}
	return total, nil
}

// end ends the frames with the outcome.
func (f frameWriter) end(failure error) error {
	var zero [4]byte
	if _, err := f.w.Write(zero[:]); err != nil {
		return err
	}
	return writeOutcome(f.w, failure)
}

// ExportReader reads the archive out of a guest's export frames. It ends
// with io.EOF only when the guest says the archive is whole; the guest's
// error, a cut stream or more than max bytes of archive are errors.
type ExportReader struct {
	r    *bufio.Reader
	left int   // of the current frame
	read int64 // of the archive
	max  int64
	err  error // sticky: the end, or what went wrong
}

// NewExportReader reads frames from r, at most max bytes of archive.
func NewExportReader(r io.Reader, max int64) *ExportReader {
	return &ExportReader{r: bufio.NewReader(r), max: max}
}

func (e *ExportReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	for e.left == 0 {
		n, err := e.length()
		if err != nil {
			e.err = err
			return 0, err
		}
		if n == 0 {
			e.err = e.outcome()
			return 0, e.err
		}
		if n > maxFrame {
			e.err = fmt.Errorf("the guest's export: a frame of %d bytes", n)
			return 0, e.err
		}
		e.left = n
	}
	n, err := e.r.Read(p[:min(len(p), e.left)])
	e.left -= n
	e.read += int64(n)
	if e.read > e.max {
		e.err = fmt.Errorf("the sandbox's files come to more than %d bytes as an archive (sparse files count whole)", e.max)
		return n, e.err
	}
	if err != nil {
		e.err = cut(err)
	}
	return n, e.err
}

func (e *ExportReader) length() (int, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(e.r, hdr[:]); err != nil {
		return 0, cut(err)
	}
	return int(binary.BigEndian.Uint32(hdr[:])), nil
}

func (e *ExportReader) outcome() error {
	if err := readOutcome(e.r); err != nil {
		return err
	}
	return io.EOF
}

// cut is a stream that ended before its last frame.
func cut(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("the guest's export: %w", err)
}
