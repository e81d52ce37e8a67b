// Command kubectl-lockstep is Lockstep's kubectl plugin: the commands a user
// of a cluster runs — explain, get, preflight, audit — and nothing that runs or
// changes the cluster's scheduling (`kubectl lockstep explain job train`).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockstep-dev/lockstep/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.ExecutePlugin(ctx, os.Args[1:]))
}
