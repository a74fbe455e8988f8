// Command stepseq drives multi-step plans for AI agents: a heartbeat drop-in for the
// Agent Step Sequencer's scripts (check, step) and an event-driven sidecar (watch).
// The command line is executor/cli; the work lives in executor and planspec.
package main

import (
	"os"

	"github.com/stepseq/stepseq/executor/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() { os.Exit(cli.Main(version)) }
