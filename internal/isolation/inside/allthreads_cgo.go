//go:build cgo

package inside

// AllThreadsSupported says whether syscall.AllThreadsSyscall works in this
// binary. Built with cgo (race-enabled test binaries, for one) it may link
// runtime/cgo, which refuses all-threads calls, so the init execs the agent.
// A build tag rather than a probe: the probe is a stop-the-world of its
// own in every sandbox's start.
const AllThreadsSupported = false
