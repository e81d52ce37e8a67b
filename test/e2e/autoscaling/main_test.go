// Package autoscaling checks Lockstep beside the real Karpenter
// (sigs.k8s.io/karpenter, hack/integrations/karpenter) with its kwok cloud
// provider: nodes it launches are kwok nodes that become Ready, GPU
// instance types publish their devices as ResourceSlices of
// gpu.example.com, and the ConfigMap karpenter-capacity makes launches fail
// with insufficient capacity on command (devcluster.KarpenterController
// states the contract). The static cluster is 2 CPU-only nodes, so every
// GPU comes from a launched node (eks profile: no feature gate; see
// profileEnv).
package autoscaling

import (
	"os"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// clusterYAML has no GPU node; the DeviceClass gpu.example.com selects the
// launched nodes' devices.
const clusterYAML = `nodePools:
- name: cpu
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels:
    topology.kubernetes.io/zone: zone-a
deviceClasses:
- name: gpu.example.com
  selectors: ['device.driver == "gpu.example.com"']
`

// profileEnv=upstream runs the package on the upstream profile (make bench
// does, for the in-tree gang beside Lockstep); the tests run on the eks
// profile, where no gate can be set.
const profileEnv = "LOCKSTEP_AUTOSCALING_PROFILE"

func TestMain(m *testing.M) {
	profile := devcluster.ProfileEKS
	if os.Getenv(profileEnv) == string(devcluster.ProfileUpstream) {
		profile = devcluster.ProfileUpstream
	}
	harness.Main(m, harness.Options{
		Profile: profile, Spec: harness.MustParseSpec(clusterYAML),
		Controllers: []harness.Controller{harness.KarpenterController},
	})
}
