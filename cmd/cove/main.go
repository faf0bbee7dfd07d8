// Command cove is Cove's single binary: the server, the node, the
// in-sandbox agent and the CLI. What a process of it is, main decides by
// the name it was started under (argv[0]), below: a sandbox's side, when
// this binary is the sandbox binary (no cove-sandbox beside it), else the
// command line.
package main

import (
	"os"
	"runtime"

	"github.com/covesandbox/cove/internal/cli"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
	"github.com/covesandbox/cove/internal/isolation/namespaces/nsinit"
)

// A sandbox's init changes namespaces on the thread it execs from: main
// runs on the process's main thread.
func init() { runtime.LockOSThread() }

func main() {
	if run := nsinit.Role(); run != nil { // a sandbox's init, the spawner of inits, or the agent
		os.Exit(run())
	}
	switch {
	case guest.Is(): // a microVM guest's /init
		os.Exit(guest.Main())
	case guest.IsAgent(): // a microVM guest's agent
		os.Exit(guest.AgentMain())
	case sudo.IsSudo(os.Args[0]): // sudo inside a sandbox
		os.Exit(sudo.Main(os.Args[1:]))
	}
	runtime.UnlockOSThread()
	os.Exit(cli.Main(os.Args[1:]))
}
