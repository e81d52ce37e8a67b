// Package install checks the Helm chart on the local control plane (eks
// profile, nothing of Lockstep installed before): the rendered chart is
// applied as is, Lockstep's three components run as processes that
// authenticate as the chart's ServiceAccounts (tokens from the TokenRequest
// API), so the chart's RBAC is what is tested, and seed 004 is won; an
// upgrade with changed values and an uninstall run on rendered manifests.
// (The local control plane has no pod network: the chart's pods stay
// Pending, and its webhook configurations, which name the chart's Service,
// are pointed at the webhook process instead — the one change made to what
// the chart renders.)
package install

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Schedulers: []devcluster.Scheduler{}, Bare: true})
}
