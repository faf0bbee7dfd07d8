// Package logx holds Cove's canonical slog attributes and logger helpers, so
// every component logs the same keys for the same things.
package logx

import (
	"io"
	"log/slog"
)

// SandboxID is the canonical attribute for a sandbox id.
func SandboxID(id string) slog.Attr { return slog.String("sandbox", id) }

// PID is the canonical attribute for a process id.
func PID(pid int) slog.Attr { return slog.Int("pid", pid) }

// Err is the canonical attribute for an error.
func Err(err error) slog.Attr { return slog.Any("err", err) }

// Discard returns a logger that drops everything (for tests and tools).
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
