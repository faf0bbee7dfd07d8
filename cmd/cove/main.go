// Command cove is Cove's single binary: the server, the node, the
// in-sandbox agent and the CLI.
package main

import (
	"os"

	"github.com/covesandbox/cove/internal/cli"
	"github.com/covesandbox/cove/internal/envd/sudo"
)

func main() {
	// In a sandbox whose sandbox binary is this one, it is also sudo.
	if sudo.IsSudo(os.Args[0]) {
		os.Exit(sudo.Main(os.Args[1:]))
	}
	os.Exit(cli.Main(os.Args[1:]))
}
