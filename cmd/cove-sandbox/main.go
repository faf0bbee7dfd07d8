// Command cove-sandbox is the sandbox init and agent alone: what `cove`
// re-executes to start a sandbox, without the server, the CLI and their
// packages, so it starts ≈ 3.5 ms sooner. `cove server` uses it when it
// lies beside the `cove` binary (or --sandbox-binary names it); without it
// `cove` starts its sandboxes itself.
package main

import (
	"fmt"
	"os"

	"github.com/covesandbox/cove/internal/envd/codeinterp"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"

	// Its init takes over when the process is a sandbox's init.
	_ "github.com/covesandbox/cove/internal/isolation/namespaces"
)

func main() {
	// In a microVM it is the initramfs's /init.
	if guest.Is() {
		os.Exit(guest.Main())
	}
	if guest.IsAgent() {
		os.Exit(guest.AgentMain())
	}
	// In a sandbox it is also sudo (/.cove/bin/sudo links to it).
	if sudo.IsSudo(os.Args[0]) {
		os.Exit(sudo.Main(os.Args[1:]))
	}
	// Inside a sandbox (as /.cove/cove-envd) it also runs the code
	// interpreter, the code-interpreter-v1 template's start command.
	if len(os.Args) > 1 && os.Args[1] == "code-interpreter" {
		os.Exit(codeinterp.Main(os.Args[2:]))
	}
	fmt.Fprintln(os.Stderr, "cove-sandbox is started by cove server as a sandbox's init; it has no commands")
	os.Exit(2)
}
