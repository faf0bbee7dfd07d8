// Command cove is Cove's single binary: the server, the node, the
// in-sandbox agent and the CLI.
package main

import (
	"os"

	"github.com/covesandbox/cove/internal/cli"
	"github.com/covesandbox/cove/internal/envd/sudo"
	"github.com/covesandbox/cove/internal/isolation/microvm/guest"
)

func main() {
	// A microVM guest's /init and agent when this binary is the sandbox
	// binary (no cove-sandbox beside it), as cove-sandbox is otherwise.
	if guest.Is() {
		os.Exit(guest.Main())
	}
	if guest.IsAgent() {
		os.Exit(guest.AgentMain())
	}
	// In a sandbox whose sandbox binary is this one, it is also sudo.
	if sudo.IsSudo(os.Args[0]) {
		os.Exit(sudo.Main(os.Args[1:]))
	}
	os.Exit(cli.Main(os.Args[1:]))
}
