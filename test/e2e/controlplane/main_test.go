// Package controlplane proves the local control plane is real (eks profile):
// the Job and resourceclaim controllers, pods becoming Running on simulated
// nodes, ResourceSlices and claim status writes all go through a real
// kube-apiserver v1.37.
package controlplane

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS})
}
