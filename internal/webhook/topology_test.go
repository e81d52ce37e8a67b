package webhook

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func nodeMeta(name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// The node label counts follow the informer's events: a key is carried
// while some node has it, through relabelling and deletions (tombstones
// too).
func TestNodeLabels(t *testing.T) {
	n := newNodeLabels()
	h := n.handler()
	a := nodeMeta("a", map[string]string{"zone": "z1", "rack": "r1"})
	b := nodeMeta("b", map[string]string{"zone": "z1"})
	h.OnAdd(a, true)
	h.OnAdd(b, true)
	b2 := nodeMeta("b", map[string]string{"zone": "z2", "block": "k1"})
	h.OnUpdate(b, b2)
	got := map[string]int{"zone": n.carried("zone"), "rack": n.carried("rack"), "block": n.carried("block")}
	if diff := cmp.Diff(map[string]int{"zone": 2, "rack": 1, "block": 1}, got); diff != "" {
		t.Errorf("after add and relabel (-want,+got):\n%s", diff)
	}
	h.OnDelete(a)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "b", Obj: b2})
	if n.carried("zone") != 0 || n.carried("rack") != 0 || len(n.counts) != 0 {
		t.Errorf("every node gone, still counted: %v", n.counts)
	}
}

// A PodGroup naming topology no node (or device) carries is admitted with
// a warning naming the field, the key and the fix; one whose topology the
// cluster has gets none.
func TestPodGroupTopologyWarnings(t *testing.T) {
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "n"}, NodeName: ptr.To("n"),
		Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"clique": {StringValue: ptr.To("c0")}}}},
	}}
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects([]client.Object{slice}...).
		WithIndex(&corev1.Pod{}, IndexGroup, groupIndexValue).Build()
	nodes := newNodeLabels()
	nodes.handler().OnAdd(nodeMeta("n", map[string]string{"topology.kubernetes.io/zone": "z1", "example.com/rack": "r1"}), true)
	v := &PodGroupValidator{reads: reads{Cached: c, Live: c}, Nodes: nodes, Devices: newDeviceIndex(c, nil)}
	group := func(required []string, preferred, device string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "g", 2)
		for _, k := range required {
			if pg.Spec.SchedulingConstraints == nil {
				pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
			}
			pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
		pg.Annotations = map[string]string{}
		if preferred != "" {
			pg.Annotations[lockv1.PreferredTopologyAnnotation] = preferred
		}
		if device != "" {
			pg.Annotations[lockv1.DeviceTopologyAnnotation] = device
		}
		return pg
	}
	for name, tc := range map[string]struct {
		pg   *lockv1.PodGroup
		want []string
	}{
		"keys and an attribute the cluster has": {pg: group([]string{"topology.kubernetes.io/zone"}, "example.com/rack", "gpu.example.com/clique")},
		"no topology":                           {pg: group(nil, "", "")},
		"a required key no node carries": {pg: group([]string{"topology.kubernetes.io/zone", "example.com/rak"}, "", ""), want: []string{
			`spec.schedulingConstraints.topology[1].key: no node carries the label "example.com/rak": the group cannot be placed until nodes are labelled example.com/rak=<domain>; check the key's spelling (` + "`lockstep preflight`" + ` lists the topology keys nodes carry)`,
		}},
		"a preferred key no node carries": {pg: group([]string{"topology.kubernetes.io/zone"}, "example.com/rack, example.com/block", ""), want: []string{
			`metadata.annotations[scheduling.lockstep.dev/preferred-topology]: no node carries the label "example.com/block": this preferred level is never met, the group is placed at its next level; check the key's spelling (` + "`lockstep preflight`" + ` lists the topology keys nodes carry)`,
		}},
		"a device attribute no device carries": {pg: group(nil, "", "clique"), want: []string{
			`metadata.annotations[scheduling.lockstep.dev/device-topology]: no device in any ResourceSlice carries the attribute "clique": the group's devices cannot share a value of it, so it cannot be placed until a driver publishes it; write it as domain/name, e.g. gpu.example.com/clique`,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			warnings, err := v.ValidateCreate(context.Background(), tc.pg)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if diff := cmp.Diff(tc.want, []string(warnings)); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
		})
	}
}
