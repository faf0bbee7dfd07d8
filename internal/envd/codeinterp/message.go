// Package codeinterp is the code interpreter that serves port 49999 inside
// a sandbox (the wire of @e2b/code-interpreter): contexts, each a kernel
// of one language, and executions streamed back as NDJSON.
//
// Kernels speak the Jupyter messaging protocol. IPython's and R's kernels
// (Debian's python3-ipykernel and r-cran-irkernel) are reached over ZeroMQ
// as their connection file says; the kernels Cove ships for JavaScript,
// Java and Bash (Debian has none) exchange the same messages as JSON lines
// over their standard input and output.
package codeinterp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// header is a Jupyter message header.
type header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// message is a Jupyter message: what a kernel publishes or answers.
type message struct {
	Header   header          `json:"header"`
	Parent   header          `json:"parent_header"`
	Metadata json.RawMessage `json:"metadata"`
	Content  json.RawMessage `json:"content"`
}

// protocolVersion is the Jupyter messaging protocol version Cove speaks.
const protocolVersion = "5.3"

// newID returns a random UUID (version 4) string.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newMessage is a request of type msgType in session.
func newMessage(session, msgType string, content any) (message, error) {
	c, err := json.Marshal(content)
	if err != nil {
		return message{}, err
	}
	return message{
		Header: header{MsgID: newID(), Session: session, Username: "cove", MsgType: msgType, Version: protocolVersion,
			Date: time.Now().UTC().Format(time.RFC3339Nano)},
		Metadata: json.RawMessage("{}"),
		Content:  c,
	}, nil
}

// delimiter separates a ZeroMQ message's routing identities from its parts.
const delimiter = "<IDS|MSG>"

// signer signs and checks messages with the connection's HMAC-SHA256 key.
type signer struct{ key []byte }

func (s signer) sign(parts ...[]byte) string {
	if len(s.key) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// frames encodes m as the frames of a ZeroMQ message.
func (s signer) frames(m message) ([][]byte, error) {
	h, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	p := []byte("{}")
	if m.Parent.MsgID != "" {
		if p, err = json.Marshal(m.Parent); err != nil {
			return nil, err
		}
	}
	md, c := orEmpty(m.Metadata), orEmpty(m.Content)
	return [][]byte{[]byte(delimiter), []byte(s.sign(h, p, md, c)), h, p, md, c}, nil
}

// parse decodes the frames of a ZeroMQ message, checking its signature.
func (s signer) parse(frames [][]byte) (message, error) {
	i := 0
	for i < len(frames) && string(frames[i]) != delimiter {
		i++
	}
	if len(frames)-i < 6 {
		return message{}, errors.New("jupyter message: too few parts")
	}
	sig, h, p, md, c := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if len(s.key) > 0 && !hmac.Equal([]byte(s.sign(h, p, md, c)), sig) {
		return message{}, errors.New("jupyter message: bad signature")
	}
	var m message
	if err := json.Unmarshal(h, &m.Header); err != nil {
		return message{}, fmt.Errorf("jupyter message header: %w", err)
	}
	if err := json.Unmarshal(p, &m.Parent); err != nil {
		return message{}, fmt.Errorf("jupyter message parent: %w", err)
	}
	m.Metadata, m.Content = md, c
	return m, nil
}

func orEmpty(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
