package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// With --karpenter, a gang disrupted whole is bound with Karpenter's
// do-not-disrupt on every member (so consolidation and drift never drain
// one rank of it while it runs); a group that replaces members one by
// one, a lone pod, and every pod without --karpenter are bound without it;
// a member that names the annotation keeps its own value.
func TestBindingProtectsRunningGangsFromKarpenter(t *testing.T) {
	gang := func(n int32) []runtime.Object {
		return []runtime.Object{builders.MakePodGroup().Namespace("ml").Name("train").MinCount(n).Obj()}
	}
	for _, tc := range []struct {
		name      string
		karpenter bool
		objs      []runtime.Object
		key       queue.Key
		// own is a do-not-disrupt value train-0 carries before it is bound.
		own  string
		want map[string]string // pod → annotation after binding ("" absent)
	}{{
		name: "gang", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "true", "train-1": "true"},
	}, {
		name: "gang without --karpenter",
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "elastic gang of minCount 1 with two members", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(1)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "true", "train-1": "true"},
	}, {
		name: "member names its own value", karpenter: true, own: "30m",
		objs: objects(gpuPods("ml", "train", "train", 2, 0), gang(2)), key: queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "30m", "train-1": "true"},
	}, {
		name: "disruptionMode single", karpenter: true,
		objs: objects(gpuPods("ml", "train", "train", 2, 0),
			[]runtime.Object{builders.MakePodGroup().Namespace("ml").Name("train").MinCount(2).DisruptionSingle().Obj()}),
		key:  queue.GroupKey("ml", "train"),
		want: map[string]string{"train-0": "", "train-1": ""},
	}, {
		name: "lone pod", karpenter: true,
		objs: gpuPods("ml", "", "solo", 1, 0), key: queue.PodKey("ml", "solo-0"),
		want: map[string]string{"solo-0": ""},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.own != "" {
				for _, o := range tc.objs {
					if p, ok := o.(*corev1.Pod); ok && p.Name == "train-0" {
						p.Annotations = map[string]string{provision.DoNotDisruptAnnotation: tc.own}
					}
				}
			}
			f := newFixtureAPI(t, twoNodes, fixtureAPI{lockstep: []string{"podgroups", "compositepodgroups", "workloads"}, karpenter: tc.karpenter}, tc.objs...)
			f.run(tc.key)
			for name, want := range tc.want {
				p := f.pod("ml", name)
				if p.Spec.NodeName == "" {
					t.Fatalf("%s not bound", name)
				}
				if got := p.Annotations[provision.DoNotDisruptAnnotation]; got != want {
					t.Errorf("%s: %s=%q, want %q", name, provision.DoNotDisruptAnnotation, got, want)
				}
			}
		})
	}
}

// fourGPUTypes are one instance type of 4 GPUs, offered in two zones.
const fourGPUTypes = `
instanceTypes:
- name: gpu-4x
  zones: [zone-a, zone-b]
  allocatable: {cpu: "48", memory: 576Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 4}]
`

// gpuNodePool is a NodePool of gpu-4x nodes, its cpu limit leaving room
// for limitNodes more.
func gpuNodePool(limitNodes int) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu, uid: pool-uid}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [gpu-4x]}]
  limits: {cpu: "%d"}
status: {resources: {cpu: "0"}}`, 48*limitNodes)
}

func karpenterFixture(t *testing.T, limitNodes int, objs ...runtime.Object) *fixture {
	t.Helper()
	types, err := provision.ParseInstanceTypes([]byte(fourGPUTypes))
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, kueueObjects(t, gpuNodePool(limitNodes))...)
	return newFixtureAPI(t, twoNodes, fixtureAPI{lockstep: []string{"podgroups", "compositepodgroups", "workloads"}, instanceTypes: types}, objs...)
}

func (f *fixture) nodeClaims() []unstructured.Unstructured {
	f.t.Helper()
	l, err := f.dyn.Resource(provision.NodeClaimResource).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// waitForNodeClaims waits until the scheduler's NodeClaim informer shows n.
func (f *fixture) waitForNodeClaims(n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d NodeClaims in the informer", n), func() bool {
		objs, err := f.s.provisioner.Load().claims.List(labels.Everything())
		return err == nil && len(objs) == n
	})
}

// requirement is the single value a NodeClaim requires of key.
func requirement(nc unstructured.Unstructured, key string) string {
	reqs, _, _ := unstructured.NestedSlice(nc.Object, "spec", "requirements")
	for _, r := range reqs {
		m := r.(map[string]any)
		if m["key"] == key {
			return fmt.Sprint(m["values"])
		}
	}
	return ""
}

// A gang of 6 one-GPU ranks on 4 GPUs: Lockstep asks Karpenter for one
// gpu-4x node (the fewest that make it fit), its pods say so and are never
// Unschedulable (Karpenter would provision for them pod by pod). When
// Karpenter deletes the NodeClaim (a launch that failed), the request is
// over and the other zone is asked for; once that node is ready the gang
// binds whole and the NodeClaim lets go of do-not-disrupt.
func TestProvisionAsksForAGangsNodesAsOneSet(t *testing.T) {
	f := karpenterFixture(t, 4, objects(gpuPods("ml", "train", "train", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 6)})...)
	k := queue.GroupKey("ml", "train")
	f.run(k)

	ncs := f.nodeClaims()
	if len(ncs) != 1 {
		t.Fatalf("%d NodeClaims, want 1", len(ncs))
	}
	if got := requirement(ncs[0], corev1.LabelTopologyZone); got != "[zone-a]" {
		t.Errorf("NodeClaim zone %s, want [zone-a]", got)
	}
	if got := ncs[0].GetAnnotations()[provision.DoNotDisruptAnnotation]; got != "true" {
		t.Errorf("NodeClaim do-not-disrupt %q, want true while the gang forms", got)
	}
	for i := 0; i < 6; i++ {
		p := f.pod("ml", fmt.Sprintf("train-%d", i))
		if got := podScheduled(p); !strings.HasPrefix(got, "False/WaitingForNodes: ") || !strings.Contains(got, "asked Karpenter for 1 node of gpu-4x in zone-a (on-demand) from NodePool gpu") {
			t.Errorf("%s: PodScheduled %q, want WaitingForNodes naming the request", p.Name, got)
		}
	}
	if got := condition(f.group("ml", "train")); !strings.HasPrefix(got, "False/WaitingForNodes: ") {
		t.Errorf("group condition %q, want WaitingForNodes", got)
	}

	// The NodeClaim's event wakes the unit: it waits for the request.
	f.waitForNodeClaims(1)
	f.run(k)
	if got := podScheduled(f.pod("ml", "train-0")); !strings.Contains(got, "waiting for the 1 node Lockstep asked Karpenter for (gpu-4x in zone-a (on-demand) from NodePool gpu): 0 ready") {
		t.Errorf("PodScheduled %q, want the request waited for", got)
	}
	if n := len(f.nodeClaims()); n != 1 {
		t.Fatalf("%d NodeClaims while the request stands, want the 1", n)
	}

	// Karpenter deletes a NodeClaim whose launch fails for lack of
	// capacity.
	if err := f.dyn.Resource(provision.NodeClaimResource).Delete(f.ctx, ncs[0].GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForNodeClaims(0)
	f.run(k)
	ncs = f.nodeClaims()
	if len(ncs) != 1 || requirement(ncs[0], corev1.LabelTopologyZone) != "[zone-b]" {
		t.Fatalf("after zone-a failed: NodeClaims %v, want one in zone-b", names(ncs))
	}
	if got := podScheduled(f.pod("ml", "train-0")); !strings.Contains(got, "gpu-4x in zone-a (on-demand) from NodePool gpu failed: Karpenter deleted 1 of its 1 NodeClaims before they launched") {
		t.Errorf("PodScheduled %q, want the zone-a failure said", got)
	}

	// The node comes up: Karpenter marks the NodeClaim initialized.
	in := builders.SnapshotInput(t, `
nodePools:
- name: new
  count: 1
  capacity: {cpu: "48", memory: 576Gi, pods: "110"}
  labels: {topology.kubernetes.io/zone: zone-b}
  devices: [{driver: gpu.example.com, count: 4}]
`)
	// Karpenter gives the node its NodeClaim's labels, annotations and
	// taints: it is reserved for the gang.
	if got := claimTaints(ncs[0]); !slices.Contains(got, provision.ReservedFor(k.String())) {
		t.Errorf("NodeClaim taints %v, want the reservation for %s", got, k)
	}
	in.Nodes[0].Annotations = map[string]string{provision.DoNotDisruptAnnotation: "true", provision.UnitAnnotation: k.String()}
	maps.Copy(in.Nodes[0].Labels, ncs[0].GetLabels())
	in.Nodes[0].Spec.Taints = claimTaints(ncs[0])
	if _, err := f.client.CoreV1().Nodes().Create(f.ctx, in.Nodes[0], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range in.Slices {
		if _, err := f.client.ResourceV1().ResourceSlices().Create(f.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nc := ncs[0].DeepCopy()
	_ = unstructured.SetNestedField(nc.Object, in.Nodes[0].Name, "status", "nodeName")
	_ = unstructured.SetNestedSlice(nc.Object, []any{map[string]any{"type": "Initialized", "status": "True"}}, "status", "conditions")
	if _, err := f.dyn.Resource(provision.NodeClaimResource).Update(f.ctx, nc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the new node's devices in the cache", func() bool {
		ni := f.s.state.Cache.Update().Node(in.Nodes[0].Name)
		return ni != nil && ni.FreeDevices() == 4
	})
	f.run(k)
	for i := 0; i < 6; i++ {
		if p := f.pod("ml", fmt.Sprintf("train-%d", i)); p.Spec.NodeName == "" {
			t.Errorf("%s not bound", p.Name)
		}
	}
	if got := f.nodeClaims()[0].GetAnnotations()[provision.DoNotDisruptAnnotation]; got != "" {
		t.Errorf("NodeClaim do-not-disrupt %q after the gang bound, want it gone (the pods hold their own)", got)
	}
	n, err := f.client.CoreV1().Nodes().Get(f.ctx, in.Nodes[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := n.Annotations[provision.DoNotDisruptAnnotation]; ok {
		t.Errorf("node do-not-disrupt %q after the gang bound, want it gone", got)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("node taints %v after the gang bound, want the reservation gone", n.Spec.Taints)
	}
}

// claimTaints are a NodeClaim's spec.taints.
func claimTaints(nc unstructured.Unstructured) []corev1.Taint {
	var spec struct {
		Taints []corev1.Taint `json:"taints"`
	}
	specObj, _, _ := unstructured.NestedMap(nc.Object, "spec")
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(specObj, &spec)
	return spec.Taints
}

// deleteGang deletes the gang's n pods (<name>-<i>) and waits until the
// scheduler's cache has none left in the namespace.
func (f *fixture) deleteGang(ns, name string, n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		if err := f.client.CoreV1().Pods(ns).Delete(f.ctx, fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.waitFor("the pods gone from the cache", func() bool {
		pods, _ := f.s.listers.pods.Pods(ns).List(labels.Everything())
		return len(pods) == 0
	})
}

func names(items []unstructured.Unstructured) []string {
	var out []string
	for _, u := range items {
		out = append(out, u.GetName())
	}
	return out
}

// What nodes cannot fix, or need not: a gang that fits makes no request; a
// gang beyond the NodePool's limit makes none and says which limit (its
// pods NoCapacity, not Unschedulable); a gang a preemption makes room for
// waits for its victims, asking for no node; a lone pod is Karpenter's to
// provision for, as without Lockstep (Unschedulable).
func TestProvisionAsksOnlyWhatNodesFix(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limitNodes int
		objs       []runtime.Object
		key        queue.Key
		pod        string
		want       string // the pod's PodScheduled prefix
		contains   string
		nominated  bool
	}{{
		name: "fits", limitNodes: 4,
		objs: objects(gpuPods("ml", "train", "train", 3, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 3)}),
		key:  queue.GroupKey("ml", "train"), pod: "train-0", want: "",
	}, {
		name: "beyond the NodePool's limit", limitNodes: 1,
		objs: objects(gpuPods("ml", "train", "train", 10, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 10)}),
		key:  queue.GroupKey("ml", "train"), pod: "train-0", want: "False/NoCapacity: ",
		contains: "would fit on 2 new nodes, beyond NodePool gpu's limits (cpu: 2 nodes need 96, its limit leaves 48 of 48)",
	}, {
		name: "a preemption makes room", limitNodes: 4,
		objs: objects(gpuPods("ml", "train", "train", 4, 1000), []runtime.Object{builders.GangPodGroup("ml", "train", 4), builders.GangPodGroup("other", "low", 4)},
			running(gpuPods("other", "low", "low", 4, 0)[:4], "gpu-0", 0), running(gpuPods("other", "low", "low", 4, 0)[4:], "gpu-1", 0)),
		// Unschedulable as kube-scheduler's preemptors are, and nominated:
		// Karpenter provisions for no pod that names a nominated node.
		key: queue.GroupKey("ml", "train"), pod: "train-0", want: "False/Unschedulable: ", contains: "preempting lower-priority pods", nominated: true,
	}, {
		name: "lone pod", limitNodes: 4,
		objs: objects(running(gpuPods("other", "", "busy", 4, 1000), "gpu-0", 0)[:0], gpuPods("ml", "", "solo", 1, 0)),
		key:  queue.PodKey("ml", "solo-0"), pod: "solo-0", want: "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := karpenterFixture(t, tc.limitNodes, tc.objs...)
			f.run(tc.key)
			if ncs := f.nodeClaims(); len(ncs) != 0 {
				t.Errorf("NodeClaims %v, want none", names(ncs))
			}
			pod := f.pod("ml", tc.pod)
			if got := pod.Status.NominatedNodeName != ""; got != tc.nominated {
				t.Errorf("nominated node %q, want one: %v", pod.Status.NominatedNodeName, tc.nominated)
			}
			got := podScheduled(pod)
			if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, tc.contains) {
				t.Errorf("PodScheduled %q, want prefix %q containing %q", got, tc.want, tc.contains)
			}
		})
	}
}

// A request ends without a cycle to end it: the gang's job is deleted
// before its nodes come (the sweep releases them: no node held from
// disruption for a gang that is gone), or its nodes do not come in time
// (the next cycle releases the set whole and asks the other zone).
func TestProvisionRequestsEnd(t *testing.T) {
	t.Run("unit gone", func(t *testing.T) {
		f := karpenterFixture(t, 4, objects(gpuPods("ml", "train", "train", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 6)})...)
		f.run(queue.GroupKey("ml", "train"))
		f.waitForNodeClaims(1)
		f.s.sweepOnce(f.ctx)
		if n := len(f.nodeClaims()); n != 1 {
			t.Fatalf("%d NodeClaims after a sweep while the gang waits, want its 1", n)
		}
		f.deleteGang("ml", "train", 6)
		f.s.sweepOnce(f.ctx)
		if ncs := f.nodeClaims(); len(ncs) != 0 {
			t.Errorf("NodeClaims %v left for a gang that is gone", names(ncs))
		}
	})
	t.Run("never what Lockstep did not make", func(t *testing.T) {
		f := karpenterFixture(t, 4, objects(gpuPods("ml", "train", "train", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 6)})...)
		k := queue.GroupKey("ml", "train")
		f.run(k)
		f.waitForNodeClaims(1)
		// A NodeClaim someone else made, marked as if for the same gang
		// but not created by Lockstep, and nodes reserved for a unit: one
		// Lockstep made for a request that ended, one it made for the
		// standing request, one it did not make.
		foreign := f.nodeClaims()[0].DeepCopy()
		foreign.SetName("someone-elses")
		foreign.SetResourceVersion("")
		lbls := foreign.GetLabels()
		delete(lbls, provision.CreatedByLabel)
		foreign.SetLabels(lbls)
		if _, err := f.dyn.Resource(provision.NodeClaimResource).Create(f.ctx, foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		reservedNode := func(name, unit string, ours bool) {
			b := builders.MakeNode().Name(name)
			if ours {
				b.Label(provision.CreatedByLabel, provision.CreatedBy)
			}
			n := b.Obj()
			n.Annotations = map[string]string{provision.UnitAnnotation: unit}
			n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, provision.ReservedFor(unit)}
			if _, err := f.client.CoreV1().Nodes().Create(f.ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		reservedNode("ended", "ml/ended", true)
		reservedNode("standing", k.String(), true)
		reservedNode("theirs", "ml/ended", false)
		f.waitFor("the nodes in the cache", func() bool {
			_, err := f.s.factory.Core().V1().Nodes().Lister().Get("theirs")
			return err == nil
		})
		f.s.sweepOnce(f.ctx)
		for _, tc := range []struct {
			node string
			want int
		}{{"ended", 1}, {"standing", 2}, {"theirs", 2}} {
			n, err := f.client.CoreV1().Nodes().Get(f.ctx, tc.node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(n.Spec.Taints) != tc.want || n.Spec.Taints[0].Key != "other" {
				t.Errorf("node %s: taints %v, want %d (the reservation lifted only from the node Lockstep made for a request that ended)", tc.node, n.Spec.Taints, tc.want)
			}
		}

		// The gang goes away: its request is released, the foreign
		// NodeClaim and node are left alone.
		f.deleteGang("ml", "train", 6)
		f.s.sweepOnce(f.ctx)
		f.s.sweepOnce(f.ctx)
		if ncs := f.nodeClaims(); len(ncs) != 1 || ncs[0].GetName() != "someone-elses" {
			t.Errorf("NodeClaims %v, want only the one Lockstep did not make", names(ncs))
		}
		if n, _ := f.client.CoreV1().Nodes().Get(f.ctx, "theirs", metav1.GetOptions{}); len(n.Spec.Taints) != 2 {
			t.Errorf("node theirs: taints %v, want both kept", n.Spec.Taints)
		}
	})
	t.Run("timed out, its node taken by another pod", func(t *testing.T) {
		f := karpenterFixture(t, 4, objects(gpuPods("ml", "train", "train", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 6)},
			running(gpuPods("other", "", "busy", 1, 1000), "gpu-0", 0))...)
		k := queue.GroupKey("ml", "train")
		f.run(k)
		f.waitForNodeClaims(1)
		nc := f.nodeClaims()[0]
		// Its node came up as gpu-0, which another pod runs on.
		_ = unstructured.SetNestedField(nc.Object, "gpu-0", "status", "nodeName")
		if _, err := f.dyn.Resource(provision.NodeClaimResource).Update(f.ctx, &nc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.waitFor("the NodeClaim's node in the informer", func() bool {
			o, err := f.s.provisioner.Load().claims.Get(nc.GetName())
			if err != nil {
				return false
			}
			n, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "nodeName")
			return n == "gpu-0"
		})
		f.run(k)
		f.clock.Step(DefaultProvisionTimeout + time.Second)
		f.run(k)
		kept, err := f.dyn.Resource(provision.NodeClaimResource).Get(f.ctx, nc.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the released NodeClaim whose node runs a pod was deleted: %v", err)
		}
		if v, ok := kept.GetAnnotations()[provision.DoNotDisruptAnnotation]; ok {
			t.Errorf("the released NodeClaim kept do-not-disrupt=%s", v)
		}
		if n := len(f.nodeClaims()); n != 2 {
			t.Errorf("%d NodeClaims, want the kept one and zone-b's", n)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := karpenterFixture(t, 4, objects(gpuPods("ml", "train", "train", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 6)})...)
		k := queue.GroupKey("ml", "train")
		f.run(k)
		f.waitForNodeClaims(1)
		f.run(k) // the NodeClaim seen
		f.clock.Step(DefaultProvisionTimeout + time.Second)
		f.run(k)
		ncs := f.nodeClaims()
		if len(ncs) != 1 || requirement(ncs[0], corev1.LabelTopologyZone) != "[zone-b]" {
			t.Fatalf("after the timeout: NodeClaims %v, want one in zone-b", names(ncs))
		}
		if got := podScheduled(f.pod("ml", "train-0")); !strings.Contains(got, "0 of 1 nodes ready after 10m0s (--karpenter-provision-timeout)") {
			t.Errorf("PodScheduled %q, want the timeout said", got)
		}
	})
}

// An offering Karpenter could not launch for one gang is not where the
// next gang is sent (for a while, as Karpenter's own cache of unavailable
// offerings): it asks the other zone at once.
func TestProvisionAvoidsOfferingsKarpenterCouldNotLaunch(t *testing.T) {
	f := karpenterFixture(t, 8, objects(gpuPods("ml", "a", "a", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "a", 6)},
		gpuPods("ml", "b", "b", 6, 0), []runtime.Object{builders.GangPodGroup("ml", "b", 6)})...)
	a := queue.GroupKey("ml", "a")
	f.run(a)
	f.waitForNodeClaims(1)
	f.run(a)
	nc := f.nodeClaims()[0]
	if err := f.dyn.Resource(provision.NodeClaimResource).Delete(f.ctx, nc.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitForNodeClaims(0)
	f.run(a) // a's zone-a request failed: a asks zone-b
	f.waitForNodeClaims(1)
	f.run(queue.GroupKey("ml", "b"))
	f.waitForNodeClaims(2)
	for _, nc := range f.nodeClaims() {
		if got := requirement(nc, corev1.LabelTopologyZone); got != "[zone-b]" {
			t.Errorf("NodeClaim %s (for %s) in %s, want zone-b: zone-a could not launch gpu-4x a moment ago", nc.GetName(), nc.GetAnnotations()[provision.UnitAnnotation], got)
		}
	}
}
