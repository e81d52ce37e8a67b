// Package examples applies every reviewed template of examples/eks — as a
// user would, with kubectl apply -n — on the local control plane of
// examples/clusters/eks.yaml (p5 nodes with GPUs and EFA on DRA, a trn1 node
// of Neuron devices and EFA), with the MPI operator, KubeRay and
// LeaderWorkerSet beside Lockstep, and checks each is placed whole and
// aligned: every claim whose template pairs devices by PCIe root got devices
// of one root. A template that stops being accepted or placed fails here.
package examples

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{
		Profile: devcluster.ProfileEKS, Spec: harness.ExampleCluster("eks.yaml"),
		Controllers: []harness.Controller{harness.MPIOperatorController, harness.KubeRayController, harness.LWSController},
	})
}
