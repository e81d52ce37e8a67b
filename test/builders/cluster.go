package builders

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// SnapshotInput renders a cluster spec (docs/cluster-spec.md) into the
// input of a snapshot: Ready nodes, their ResourceSlices and DeviceClasses.
func SnapshotInput(t testing.TB, spec string) snapshot.Input {
	t.Helper()
	c, err := clusterspec.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range objs.Nodes {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	return snapshot.Input{Features: features.Default(), Nodes: objs.Nodes, Slices: objs.ResourceSlices, Classes: objs.DeviceClasses}
}
