// Command cove-sandbox is the sandbox init and agent alone: what `cove`
// re-executes to start a sandbox, without the server, the CLI and their
// packages, so it starts ≈ 3.5 ms sooner. `cove server` uses it when it
// lies beside the `cove` binary (or --sandbox-binary names it); without it
// `cove` starts its sandboxes itself. What a process of it is, main decides
// by the name it was started under (argv[0]), below.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/covesandbox/cove/internal/envd/codeinterp"
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
	case guest.Is(): // a microVM guest's /init (of its initramfs)
		os.Exit(guest.Main())
	case guest.IsAgent(): // a microVM guest's agent
		os.Exit(guest.AgentMain())
	case sudo.IsSudo(os.Args[0]): // sudo inside a sandbox (/.cove/bin/sudo links to it)
		os.Exit(sudo.Main(os.Args[1:]))
	case len(os.Args) > 1 && os.Args[1] == "code-interpreter":
		// Inside a sandbox (as /.cove/cove-envd) it also runs the code
		// interpreter, the code-interpreter-v1 template's start command.
		os.Exit(codeinterp.Main(os.Args[2:]))
	}
	fmt.Fprintln(os.Stderr, "cove-sandbox is started by cove server as a sandbox's init; it has no commands")
	os.Exit(2)
}
