//go:build !cgo

package namespaces

// allThreadsSupported: a binary built without cgo never links runtime/cgo,
// so all-threads calls work (see allthreads_cgo.go).
const allThreadsSupported = true
