//go:build bench

// Package bench holds the benchmarks that need the local control plane
// (`make bench`); they print figures and never fail on time.
package bench

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
