//go:build tools

// Package tools pins benchstat, which `make bench` uses to print the
// decision core's benchmarks side by side with a baseline build's
// (hack/bench-core.sh). A module of its own, so that its dependencies meet
// no other tool's.
package tools

import _ "golang.org/x/perf/cmd/benchstat"
