// Package preflightskew runs `lockstep preflight` against a control plane
// whose components disagree, as a self-managed one can: kube-apiserver has
// the in-tree gang and the Job integration on (GenericWorkload,
// WorkloadWithJob) and four DRA features off, kube-controller-manager runs
// with every gate at its default (WorkloadWithJob off). A Job with
// spec.scheduling is then accepted and never becomes a gang, and the DRA
// feature table says which features this API server does not serve.
package preflightskew

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// apiserverGates are the upstream profile's plus four DRA features off.
const apiserverGates = "DRAWorkloadResourceClaims=true,GenericWorkload=true,WorkloadWithJob=true," +
	"DRAPartitionableDevices=false,DRAConsumableCapacity=false,DRADeviceBindingConditions=false,ResourceHealthStatus=false,ResourceHealthStatusMessage=false"

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{
		Profile: devcluster.ProfileUpstream,
		ComponentGates: map[string]string{
			"kube-apiserver":          apiserverGates,
			"kube-controller-manager": "",
		},
	})
}
