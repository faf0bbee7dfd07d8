// Package pipe joins two connections.
package pipe

import (
	"io"
	"net"
	"sync"
)

// Splice copies a to b and b to a until both directions end, passing each
// end on (a half close where the connection has one, else a close), then
// closes both.
func Splice(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go one(a, b)
	go one(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
