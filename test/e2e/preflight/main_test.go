// Package preflight runs `lockstep preflight` against a local control plane
// of Amazon EKS's device shapes (examples/clusters/eks.yaml: p5 and trn1
// managed node groups with accelerators and EFA on DRA, a static Karpenter
// NodePool of Bottlerocket 1.63.0 on the NVIDIA DRA driver, Auto Mode and
// tainted Spot pools on device plugins): it passes without a warning, and
// each misconfiguration preflight knows — made on the cluster, then undone —
// is reported with its nodes, its fix and its exit code.
package preflight

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.ExampleCluster("eks.yaml")})
}
