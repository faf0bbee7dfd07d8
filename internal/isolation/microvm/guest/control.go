package guest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// ControlPort is where a guest's init takes the node's requests, on
// connections from the node's address (NodeAddr) alone; each starts with
// one byte that names it:
//
//   - RequestExport: the init freezes the sandbox's cgroup, writes its
//     writable layer (layertar's form) in export frames and keeps the
//     sandbox frozen until the node closes the connection (the node stops
//     the machine first when it is to stay paused).
//   - RequestClock, then the time as 8 bytes (big-endian nanoseconds
//     since 1970): the init sets the guest's clock, which stood still
//     while the machine was stopped, and answers with an outcome.
//   - RequestAddress, then a 4-byte length and an Address in JSON: the
//     init moves eth0 to the sandbox's new address and gateway (a guest
//     restored into another network namespace of the pool), and answers
//     with an outcome.
//   - RequestThaw: the init ends an export that waits for the node's
//     close and thaws the sandbox, and answers with an outcome. A copy of
//     a machine saved during an export (a fork's Image follows the copy of
//     the files) waits for a close that cannot come: its connection was
//     the source's.
//   - RequestHostname, then a 1-byte length and the name: the init sets
//     the guest's host name and the root's /etc/hostname and /etc/hosts
//     (a copy of another sandbox's guest), and answers with an outcome.
//   - RequestSeed, then SeedSize bytes from the host's random source: the
//     init credits them to the guest kernel's entropy pool and reseeds its
//     random number generator, and answers with an outcome. Guests started
//     from one saved machine (a boot snapshot's, a fork's) would otherwise
//     go on from one generator's state.
const ControlPort = 49981

// ErrUnknownRequest is the answer of a guest's init to a request it does
// not know: one that booted with an older sandbox binary (a guest saved
// before the node was upgraded).
var ErrUnknownRequest = errors.New("a request the guest's init does not know")

// unknownRequest starts the init's answer to a request it does not know.
const unknownRequest = "no request "

// SeedSize is the length of a RequestSeed's seed.
const SeedSize = 64

// The requests on ControlPort.
const (
	RequestExport   byte = 'E'
	RequestClock    byte = 'C'
	RequestAddress  byte = 'A'
	RequestHostname byte = 'H'
	RequestThaw     byte = 'T'
	RequestSeed     byte = 'R'
)

// Address is the sandbox's address (with its prefix) and gateway.
type Address struct {
	Address string `json:"address"`
	Gateway string `json:"gateway"`
}

// The link-local pair on the tap between the node and a guest: the node's
// dials come from NodeAddr to GuestAddr.
const (
	NodeAddr  = "169.254.100.1"
	GuestAddr = "169.254.100.2"
)

// writeOutcome writes a request's outcome: a 4-byte length and the
// error's text (none: it went well).
func writeOutcome(w io.Writer, failure error) error {
	msg := ""
	if failure != nil {
		msg = failure.Error()
	}
	buf := make([]byte, 4+len(msg))
	binary.BigEndian.PutUint32(buf, uint32(len(msg)))
	copy(buf[4:], msg)
	_, err := w.Write(buf)
	return err
}

// readOutcome reads a request's outcome: nil when it went well.
func readOutcome(r io.Reader) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return cut(err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil
	}
	msg := make([]byte, min(n, 4096))
	if _, err := io.ReadFull(r, msg); err != nil {
		return cut(err)
	}
	if bytes.HasPrefix(msg, []byte(unknownRequest)) {
		return fmt.Errorf("the guest: %s: %w", msg, ErrUnknownRequest)
	}
	return fmt.Errorf("the guest: %s", msg)
}

// Thaw asks the guest's init on c (a connection to ControlPort) to end a
// pending export and thaw the sandbox, and waits for its answer.
func Thaw(c io.ReadWriter) error {
	if _, err := c.Write([]byte{RequestThaw}); err != nil {
		return err
	}
	return readOutcome(c)
}

// SetClock asks the guest's init on c (a connection to ControlPort) to
// set the guest's clock to now, and waits for its answer.
func SetClock(c io.ReadWriter, now time.Time) error {
	req := make([]byte, 9)
	req[0] = RequestClock
	binary.BigEndian.PutUint64(req[1:], uint64(now.UnixNano()))
	if _, err := c.Write(req); err != nil {
		return err
	}
	return readOutcome(c)
}

// SetAddress asks the guest's init on c (a connection to ControlPort) to
// move the sandbox to a, and waits for its answer.
func SetAddress(c io.ReadWriter, a Address) error {
	body, err := json.Marshal(a)
	if err != nil {
		return err
	}
	req := make([]byte, 5, 5+len(body))
	req[0] = RequestAddress
	binary.BigEndian.PutUint32(req[1:], uint32(len(body)))
	if _, err := c.Write(append(req, body...)); err != nil {
		return err
	}
	return readOutcome(c)
}

// SetHostname asks the guest's init on c (a connection to ControlPort) to
// name the guest, and waits for its answer.
func SetHostname(c io.ReadWriter, name string) error {
	if len(name) == 0 || len(name) > 64 {
		return fmt.Errorf("host name %q", name)
	}
	if _, err := c.Write(append([]byte{RequestHostname, byte(len(name))}, name...)); err != nil {
		return err
	}
	return readOutcome(c)
}

// Reseed gives the guest's init on c (a connection to ControlPort) seed
// (SeedSize bytes) for the guest kernel's random number generator, and
// waits for its answer.
func Reseed(c io.ReadWriter, seed []byte) error {
	if len(seed) != SeedSize {
		return fmt.Errorf("a seed of %d bytes, not %d", len(seed), SeedSize)
	}
	if _, err := c.Write(append([]byte{RequestSeed}, seed...)); err != nil {
		return err
	}
	return readOutcome(c)
}
