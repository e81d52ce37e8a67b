package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
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
		Build()
	nodes := newNodeLabels()
	nodes.handler().OnAdd(nodeMeta("n", map[string]string{"topology.kubernetes.io/zone": "z1", "example.com/rack": "r1"}), true)
	v := &PodGroupValidator{reads: testReads(c), topologyView: topologyView{Nodes: nodes, Devices: newDeviceIndex(c, nil)}}
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
		"a device attribute no device carries": {pg: group(nil, "", "gpu.example.com/nvlink"), want: []string{
			`metadata.annotations[scheduling.lockstep.dev/device-topology]: no device in any ResourceSlice carries the attribute "gpu.example.com/nvlink": the group's devices cannot share a value of it, so it cannot be placed until a driver publishes it; write it as domain/name, e.g. gpu.example.com/clique`,
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
	// A topology annotation a Job is refused for is refused on a
	// PodGroup, with the same reason; an update keeps a value it had.
	for name, tc := range map[string]struct {
		preferred, device, want string
	}{
		"no key at all":            {preferred: ",,,", want: `item 1 of ",,," is empty`},
		"an empty level":           {preferred: "example.com/rack,,topology.kubernetes.io/zone", want: `item 2 of`},
		"a level twice":            {preferred: "example.com/rack,example.com/rack", want: `"example.com/rack" is listed twice`},
		"not a label key":          {preferred: "rack!", want: `"rack!" is not a node label key`},
		"an unqualified attribute": {device: "clique", want: `"clique" is not a qualified device attribute`},
	} {
		t.Run(name, func(t *testing.T) {
			pg := group(nil, tc.preferred, tc.device)
			_, err := v.ValidateCreate(context.Background(), pg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("PodGroup: got %v, want a refusal saying %s", err, tc.want)
			}
			job := builders.IndexedJob("team-a", "j", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
			job.Annotations = pg.Annotations
			if _, nq := jobintegration.TopologyOf(integrationSet.ForKind("batch/v1", "Job").Wrap(job)); nq == nil || !strings.Contains(nq.Error(), tc.want) {
				t.Errorf("Job: got %v, want a refusal saying %s", nq, tc.want)
			}
			if _, err := v.ValidateUpdate(context.Background(), pg, pg); err != nil {
				t.Errorf("an update that keeps the value: refused: %v", err)
			}
		})
	}
}

// A Job and a CompositePodGroup naming topology no node carries are warned
// as a PodGroup is, naming where they wrote it; a Job refused for its
// topology annotations is refused with no "not a gang" warning beside it.
func TestJobAndTreeTopologyWarnings(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).
		WithIndex(&lockv1.PodGroup{}, IndexParent, parentIndexValue).
		WithIndex(&lockv1.CompositePodGroup{}, IndexParent, parentIndexValue).Build()
	nodes := newNodeLabels()
	nodes.handler().OnAdd(nodeMeta("n", map[string]string{"topology.kubernetes.io/zone": "z1"}), true)
	view := topologyView{Nodes: nodes}
	jobs := &JobValidator{reads: testReads(c), topologyView: view, Integration: integrationSet.ForKind("batch/v1", "Job")}
	job := func(ann map[string]string) *batchv1.Job {
		j := builders.IndexedJob("team-a", "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
		j.Annotations = ann
		return j
	}
	warnings, err := jobs.ValidateCreate(context.Background(), job(map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone,example.com/rak"}))
	if err != nil {
		t.Fatal(err)
	}
	want := `metadata.annotations[scheduling.lockstep.dev/required-topology]: no node carries the label "example.com/rak": the job cannot be placed until nodes are labelled example.com/rak=<domain>`
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Errorf("Job warnings %q, want one starting %q", warnings, want)
	}
	if warnings, _ := jobs.ValidateCreate(context.Background(), job(map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone"})); len(warnings) != 0 {
		t.Errorf("a Job whose key the nodes carry is warned: %q", warnings)
	}
	warnings, err = jobs.ValidateCreate(context.Background(), job(map[string]string{lockv1.PreferredTopologyAnnotation: "a,a"}))
	if err == nil {
		t.Fatal("a Job listing a level twice is admitted")
	}
	for _, w := range warnings {
		if strings.Contains(w, "not a gang") {
			t.Errorf("a refused Job is also told %q", w)
		}
	}

	trees := &CompositePodGroupValidator{reads: testReads(c), topologyView: view}
	cpg := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job",
		Annotations: map[string]string{lockv1.PreferredTopologyAnnotation: "example.com/block"}}}
	cpg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}}
	warnings, err = trees.ValidateCreate(context.Background(), cpg)
	if err != nil {
		t.Fatal(err)
	}
	want = `metadata.annotations[scheduling.lockstep.dev/preferred-topology]: no node carries the label "example.com/block": this preferred level is never met, the tree is placed at its next level`
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Errorf("CompositePodGroup warnings %q, want one starting %q", warnings, want)
	}
	cpg.Annotations[lockv1.PreferredTopologyAnnotation] = ",,,"
	if _, err := trees.ValidateCreate(context.Background(), cpg); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("a CompositePodGroup preferring \",,,\": %v, want it refused", err)
	}
}

// A gang Job whose min-count is below its size is warned that a framework
// assuming a fixed world size may wait or fail; one at its size is not.
func TestMinCountBelowSizeIsWarned(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
	v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind("batch/v1", "Job")}
	for _, tc := range []struct {
		minCount string
		want     bool
	}{{"4", true}, {"8", false}} {
		j := builders.IndexedJob("team-a", "train", 8, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
		j.Annotations = map[string]string{"scheduling.lockstep.dev/min-count": tc.minCount}
		warnings, err := v.ValidateCreate(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, w := range warnings {
			if strings.Contains(w, "below the job's 8 pods") && strings.Contains(w, "fixed world size") {
				got = true
			}
		}
		if got != tc.want {
			t.Errorf("min-count %s of 8: warned %v, want %v (%q)", tc.minCount, got, tc.want, warnings)
		}
	}
}

// A gang that can only land on Spot is warned: one whose capacity types
// allow only spot (each interruption restarts it), one none of whose types
// any node has (never placed), and a Job whose template selects Spot nodes
// while its types leave spot out; a gang with on-demand nodes to use is not.
func TestCapacityWarnings(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).
		WithIndex(&lockv1.PodGroup{}, IndexParent, parentIndexValue).Build()
	spotOnly := newNodeLabels()
	spotOnly.handler().OnAdd(nodeMeta("s", map[string]string{"karpenter.sh/capacity-type": "spot"}), true)
	mixed := newNodeLabels()
	mixed.handler().OnAdd(nodeMeta("s", map[string]string{"karpenter.sh/capacity-type": "spot"}), true)
	mixed.handler().OnAdd(nodeMeta("o", map[string]string{"karpenter.sh/capacity-type": "on-demand"}), true)
	group := func(capacity string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("team-a", "g", 2)
		if capacity != "" {
			pg.Annotations = map[string]string{lockv1.CapacityTypesAnnotation: capacity}
		}
		return pg
	}
	for name, tc := range map[string]struct {
		nodes *nodeLabels
		pg    *lockv1.PodGroup
		want  string
	}{
		"on-demand nodes to use":         {nodes: mixed, pg: group("")},
		"spot only":                      {nodes: mixed, pg: group("spot"), want: "runs on Spot capacity only, and each Spot interruption"},
		"only Spot nodes, spot left out": {nodes: spotOnly, pg: group(""), want: "no node is of those capacity types (0 on-demand, 0 reserved, 1 spot), so the group is never placed"},
		"only Spot nodes, spot allowed":  {nodes: spotOnly, pg: group("on-demand,spot")},
	} {
		t.Run(name, func(t *testing.T) {
			v := &PodGroupValidator{reads: testReads(c), topologyView: topologyView{Nodes: tc.nodes}}
			warnings, err := v.ValidateCreate(context.Background(), tc.pg)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(warnings, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
	jobs := &JobValidator{reads: testReads(c), topologyView: topologyView{Nodes: mixed}, Integration: integrationSet.ForKind("batch/v1", "Job")}
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
	pod.Spec.NodeSelector = map[string]string{"karpenter.sh/capacity-type": "spot"}
	warnings, err := jobs.ValidateCreate(context.Background(), builders.IndexedJob("team-a", "j", 2, pod))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(warnings, "\n"); !strings.Contains(got, `selects Spot nodes (karpenter.sh/capacity-type=spot), but the job's capacity types (on-demand,reserved) leave spot out`) {
		t.Errorf("a Job selecting Spot nodes: warnings %q", got)
	}
}

// A problem of a job's own fields refuses its creation, and an update
// that brings it in, but not an update of a job that always had it (one
// admitted before the check existed: its controller's and autoscaler's
// updates go on).
func TestUpdateIsRefusedOnlyForNewProblems(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).Build()
	v := &JobValidator{reads: testReads(c), Integration: integrationSet.ForKind("ray.io/v1", "RayCluster")}
	cluster := func(groups int) *unstructured.Unstructured {
		workers := []any{}
		for i := range groups {
			workers = append(workers, map[string]any{"groupName": fmt.Sprintf("g%d", i), "replicas": int64(1), "minReplicas": int64(1), "maxReplicas": int64(4),
				"template": map[string]any{"spec": map[string]any{"schedulerName": lockv1.SchedulerName}}})
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster",
			"metadata": map[string]any{"namespace": "team-a", "name": "rc"},
			"spec":     map[string]any{"headGroupSpec": map[string]any{"template": map[string]any{"spec": map[string]any{"schedulerName": lockv1.SchedulerName}}}, "workerGroupSpecs": workers}}}
		return u
	}
	typed := func(u *unstructured.Unstructured) runtime.Object {
		o := v.Integration.NewObject()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if _, err := v.ValidateCreate(context.Background(), typed(cluster(8))); err == nil {
		t.Error("a RayCluster of 8 elastic worker groups created")
	}
	if _, err := v.ValidateUpdate(context.Background(), typed(cluster(7)), typed(cluster(8))); err == nil {
		t.Error("an update to 8 elastic worker groups admitted")
	}
	if _, err := v.ValidateUpdate(context.Background(), typed(cluster(8)), typed(cluster(8))); err != nil {
		t.Errorf("an update of a RayCluster that always had 8 groups refused: %v", err)
	}
}

// A Job whose pods select only an EKS Auto Mode pool (no DRA driver) but
// ask for a DRA DeviceClass is warned, naming the pool it reaches and the
// pool that publishes the class; one selecting that pool is not, nor one
// that selects no nodes at all.
func TestDriverPathWarnings(t *testing.T) {
	class := builders.ExtendedResourceClass("gpu.example.com", "gpu.example.com", "example.com/gpu")
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "ng-0-gpu"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "ng-0"}, NodeName: ptr.To("ng-0"),
		Devices: []resourcev1.Device{{Name: "gpu-0"}},
	}}
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).
		WithObjects(class, slice, builders.ClaimTemplate("team-a", "one-gpu", "gpu.example.com", 1)).Build()
	nodes := newNodeLabels()
	nodes.handler().OnAdd(nodeMeta("auto-0", map[string]string{"eks.amazonaws.com/compute-type": "auto", "karpenter.sh/nodepool": "general-purpose"}), true)
	nodes.handler().OnAdd(nodeMeta("ng-0", map[string]string{"eks.amazonaws.com/nodegroup": "gpu-ng"}), true)
	r := testReads(c)
	v := &JobValidator{reads: r, topologyView: topologyView{Nodes: nodes}, Integration: integrationSet.ForKind("batch/v1", "Job"),
		Claims: &claimChecks{reads: r, Devices: newDeviceIndex(c, dra.NewCache())}}
	for name, tc := range map[string]struct {
		selector map[string]string
		want     string
	}{
		"Auto Mode only":   {selector: map[string]string{"eks.amazonaws.com/compute-type": "auto"}, want: `reaches 1 nodes (pools general-purpose), none of which publishes a device of DeviceClass "gpu.example.com" (pools that do: gpu-ng)`},
		"the DRA pool":     {selector: map[string]string{"eks.amazonaws.com/nodegroup": "gpu-ng"}},
		"no node selected": {},
	} {
		t.Run(name, func(t *testing.T) {
			pod := builders.MakePod().Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "one-gpu").Obj()
			pod.Spec.NodeSelector = tc.selector
			warnings, err := v.ValidateCreate(context.Background(), builders.IndexedJob("team-a", "j", 2, pod))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(warnings, "\n")
			if tc.want == "" && strings.Contains(got, "node selection reaches") || !strings.Contains(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

// The reverse: a Job asking for the device plugin's nvidia.com/gpu whose
// pods select only a pool whose GPUs a DRA driver publishes (no node there
// advertises the resource) is warned, naming both pools; one selecting the
// device-plugin pool is not, nor one whose selected DRA pool publishes a
// DeviceClass that serves the name (extendedResourceName), nor a resource
// no node offers at all (the autoscaler's to supply).
func TestExtendedPathWarnings(t *testing.T) {
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-0-gpu"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: "gpu.nvidia.com", Pool: resourcev1.ResourcePool{Name: "dra-0"}, NodeName: ptr.To("dra-0"),
		Devices: []resourcev1.Device{{Name: "gpu-0"}},
	}}
	nodes := newNodeLabels()
	for _, n := range []*corev1.Node{
		builders.MakeNode().Name("dp-0").Label("eks.amazonaws.com/nodegroup", "device-plugin").Capacity("nvidia.com/gpu", "8").Obj(),
		builders.MakeNode().Name("dra-0").Label("eks.amazonaws.com/nodegroup", "dra").Obj(),
	} {
		obj, err := trimNode(n)
		if err != nil {
			t.Fatal(err)
		}
		nodes.handler().OnAdd(obj, true)
	}
	for name, tc := range map[string]struct {
		resource corev1.ResourceName
		selector map[string]string
		classes  []client.Object
		want     string
	}{
		"DRA pool asked for the plugin's resource": {resource: "nvidia.com/gpu", selector: map[string]string{"eks.amazonaws.com/nodegroup": "dra"},
			want: `asks for "nvidia.com/gpu", but its node selection reaches 1 nodes (pools dra), none of which advertises it or publishes a device of a DeviceClass that serves it (pools that do: device-plugin)`},
		"the device-plugin pool": {resource: "nvidia.com/gpu", selector: map[string]string{"eks.amazonaws.com/nodegroup": "device-plugin"}},
		"no node selected":       {resource: "nvidia.com/gpu"},
		"a class serves the name on the DRA pool": {resource: "nvidia.com/gpu", selector: map[string]string{"eks.amazonaws.com/nodegroup": "dra"},
			classes: []client.Object{builders.ExtendedResourceClass("gpu.nvidia.com", "gpu.nvidia.com", "nvidia.com/gpu")}},
		"the class's own name on the DRA pool": {resource: "deviceclass.resource.kubernetes.io/gpu.nvidia.com", selector: map[string]string{"eks.amazonaws.com/nodegroup": "dra"},
			classes: []client.Object{builders.ExtendedResourceClass("gpu.nvidia.com", "gpu.nvidia.com", "other.example.com/gpu")}},
		"offered nowhere": {resource: "vpc.amazonaws.com/efa", selector: map[string]string{"eks.amazonaws.com/nodegroup": "dra"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(append(tc.classes, slice)...).Build()
			r := testReads(c)
			v := &JobValidator{reads: r, topologyView: topologyView{Nodes: nodes}, Integration: integrationSet.ForKind("batch/v1", "Job"),
				Claims: &claimChecks{reads: r, Devices: newDeviceIndex(c, dra.NewCache())}}
			pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(tc.resource, "1").Obj()
			pod.Spec.NodeSelector = tc.selector
			warnings, err := v.ValidateCreate(context.Background(), builders.IndexedJob("team-a", "j", 2, pod))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(warnings, "\n")
			if tc.want == "" && strings.Contains(got, "asks for") || !strings.Contains(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

// The webhook keeps of a Node only what admission reads: its name, labels
// and extended allocatable resources.
func TestTrimNode(t *testing.T) {
	n := builders.MakeNode().Name("n").Label("k", "v").Capacity("nvidia.com/gpu", "8").Capacity(corev1.ResourceCPU, "64").
		Taint("t", "", corev1.TaintEffectNoSchedule).Obj()
	n.Annotations = map[string]string{"a": "b"}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}}
	obj, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Node)
	if got.Name != "n" || got.Labels["k"] != "v" || len(got.Spec.Taints) != 0 || got.Annotations != nil || got.Status.Images != nil || got.Status.Capacity != nil {
		t.Errorf("trimmed node %+v keeps more than name, labels and extended allocatable", got)
	}
	if len(got.Status.Allocatable) != 1 || got.Status.Allocatable.Name("nvidia.com/gpu", "").Value() != 8 {
		t.Errorf("allocatable %v, want nvidia.com/gpu only", got.Status.Allocatable)
	}
}
