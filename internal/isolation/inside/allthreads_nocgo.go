//go:build !cgo

package inside

// AllThreadsSupported: a binary built without cgo never links runtime/cgo,
// so all-threads calls work (see allthreads_cgo.go).
const AllThreadsSupported = true
