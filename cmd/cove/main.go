// Command cove is Cove's single binary: the server, the node, the
// in-sandbox agent and the CLI.
package main

import (
	"os"

	"github.com/covesandbox/cove/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
