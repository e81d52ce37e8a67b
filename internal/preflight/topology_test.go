package preflight

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const (
	zone = corev1.LabelTopologyZone
	rack = "example.com/rack"
)

// node is a node with labels "key=value" pairs.
func node(name string, labels ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

// racks are 2 zones × 2 racks × 2 nodes, rack r<z><i> in zone z<z>.
func racks() []corev1.Node {
	var out []corev1.Node
	for i := 0; i < 8; i++ {
		out = append(out, node(fmt.Sprint("n", i), zone, fmt.Sprint("z", i/4), rack, fmt.Sprintf("r%d", i/2)))
	}
	return out
}

func group(name string, required []string, preferred string) runtime.Object {
	pg := builders.GangPodGroup("ml", name, 2)
	for _, k := range required {
		if pg.Spec.SchedulingConstraints == nil {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		}
		pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
	}
	if preferred != "" {
		pg.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: preferred}
	}
	u, err := podgroup.ToUnstructured(pg)
	if err != nil {
		panic(err)
	}
	return u
}

type line struct {
	Name   string
	Status Status
	Detail string
}

func TestCheckTopology(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes  []corev1.Node
		groups []runtime.Object
		want   []line
	}{
		"racks in zones, used by a group: nothing to report": {
			nodes:  racks(),
			groups: []runtime.Object{group("a", []string{zone}, rack)},
			want: []line{
				{"topology " + rack, OK, "4 domain(s) over 8 of 8 nodes, used by 1 PodGroup(s)"},
				{"topology " + zone, OK, "2 domain(s) over 8 of 8 nodes, used by 1 PodGroup(s)"},
			},
		},
		"a rack across two zones, a node without its rack": {
			nodes:  append(racks()[:7], node("n7", zone, "z1"), node("n8", zone, "z0", rack, "r3")),
			groups: []runtime.Object{group("a", []string{zone}, rack)},
			want: []line{
				{"topology " + rack, Warn, "4 domain(s) over 8 of 9 nodes, used by 1 PodGroup(s); 1 node(s) lack it (n7): a group using it never runs there; " +
					"example.com/rack=r3 spans topology.kubernetes.io/zone values [z0 z1]: example.com/rack does not nest in topology.kubernetes.io/zone"},
				{"topology " + zone, OK, "2 domain(s) over 9 of 9 nodes, used by 1 PodGroup(s)"},
			},
		},
		"a key a group uses that no node carries; a cluster without zones": {
			nodes:  []corev1.Node{node("a"), node("b", rack, "r0")},
			groups: []runtime.Object{group("a", nil, "example.com/block, "+rack)},
			want: []line{
				{"topology example.com/block", Warn, "no node carries it, and 1 PodGroup(s) name it: a group requiring it never fits; one preferring it falls back to its wider levels"},
				{"topology " + rack, Warn, "1 domain(s) over 1 of 2 nodes, used by 1 PodGroup(s); 1 node(s) lack it (a): a group using it never runs there; 1 one-node domain(s) (r0 (node b)): a gang kept in one of them must fit on one node"},
				{"topology " + zone, Info, "no node carries it"},
			},
		},
		"EKS network layers: a layer-3 node under two layer-2 nodes": {
			nodes: []corev1.Node{
				node("a", zone, "z", labelNetworkLayer1, "nn1", labelNetworkLayer2, "nn2", labelNetworkLayer3, "nn4"),
				node("b", zone, "z", labelNetworkLayer1, "nn1", labelNetworkLayer2, "nn2", labelNetworkLayer3, "nn4"),
				node("c", zone, "z", labelNetworkLayer1, "nn1", labelNetworkLayer2, "nn3", labelNetworkLayer3, "nn4"),
				node("d", zone, "z", labelNetworkLayer1, "nn1", labelNetworkLayer2, "nn3", labelNetworkLayer3, "nn6"),
			},
			want: []line{
				{"topology " + labelNetworkLayer1, OK, "1 domain(s) over 4 of 4 nodes"},
				{"topology " + labelNetworkLayer2, OK, "2 domain(s) over 4 of 4 nodes"},
				{"topology " + labelNetworkLayer3, Warn, "2 domain(s) over 4 of 4 nodes; " + labelNetworkLayer3 + "=nn4 spans " + labelNetworkLayer2 + " values [nn2 nn3]: " + labelNetworkLayer3 + " does not nest in " + labelNetworkLayer2 + "; 1 one-node domain(s) (nn6 (node d)): a gang kept in one of them must fit on one node"},
				{"topology " + zone, OK, "1 domain(s) over 4 of 4 nodes"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList"}, tc.groups...)
			r := &Report{}
			r.checkTopology(context.Background(), dyn, tc.nodes)
			var got []line
			for _, c := range r.Checks {
				got = append(got, line{c.Name, c.Status, c.Detail})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("checks (-want,+got):\n%s", diff)
			}
			if r.Failed() {
				t.Error("a topology finding failed preflight: it only warns")
			}
		})
	}
}
