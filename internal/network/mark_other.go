//go:build !linux

package network

import "syscall"

// MarkTenant marks nothing: only Linux has the nodes' firewalls that read
// the mark (and runs sandboxes).
func MarkTenant(_, _ string, _ syscall.RawConn) error { return nil }
