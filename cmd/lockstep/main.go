// Command lockstep is the gang-aware, DRA-native batch scheduler for
// Kubernetes and its tooling, as one binary with subcommands.
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
	os.Exit(cli.Execute(ctx, os.Args[1:]))
}
