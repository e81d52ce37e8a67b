package ray

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}
}

func clusterSpec() rayv1.RayClusterSpec {
	return rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: template()},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
			{GroupName: "gpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4), NumOfHosts: 2, Template: template()},
			{GroupName: "cpu", Replicas: ptr.To[int32](3), MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](2), Template: template()},
		},
	}
}

func TestGroups(t *testing.T) {
	suspendedGroup := clusterSpec()
	suspendedGroup.WorkerGroupSpecs[0].Suspend = ptr.To(true)
	belowMin := clusterSpec()
	belowMin.WorkerGroupSpecs[0].Replicas = ptr.To[int32](0)
	clash := clusterSpec()
	clash.WorkerGroupSpecs[1].GroupName = "head"
	allNeeded := clusterSpec()
	allNeeded.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](2)
	allNeeded.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](2)
	allNeeded.WorkerGroupSpecs[1].MinReplicas = ptr.To[int32](2)
	allNeeded.WorkerGroupSpecs[1].MaxReplicas = ptr.To[int32](2)
	atMin := clusterSpec()
	atMin.WorkerGroupSpecs[0].Replicas = ptr.To[int32](1)
	// Admission writes each role's group into its template; the job is
	// still the same tree, not one naming groups of its own.
	labelled := clusterSpec()
	labelled.HeadGroupSpec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "ray-head"}
	labelled.WorkerGroupSpecs[0].Template.Labels = map[string]string{lockv1.PodGroupLabel: "ray-gpu"}
	foreign := clusterSpec()
	foreign.WorkerGroupSpecs[0].Template.Labels = map[string]string{lockv1.PodGroupLabel: "ray-cpu"}
	wide := clusterSpec()
	for i := range 6 {
		wide.WorkerGroupSpecs = append(wide.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: fmt.Sprintf("g%d", i), Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1), Template: template()})
	}
	classes := clusterSpec()
	classes.WorkerGroupSpecs[1].Template.Spec.PriorityClassName = "low"
	zoned := clusterSpec()
	root := &jobintegration.Composite{Name: "ray", MinGroupCount: 3}
	head := jobintegration.Group{Name: "ray-head", Template: "head", MinCount: 1, Size: 1, Roles: []string{"head"}, Parent: root}
	for name, tc := range map[string]struct {
		spec        rayv1.RayClusterSpec
		annotations map[string]string
		want        []jobintegration.Group
		wantErr     bool
	}{
		// gpu: 2 replicas × 2 hosts, at least 1 × 2; cpu: 3 replicas capped
		// at 2, none required: the head is a child of its own, never
		// stood in for by a worker.
		"a tree: the head and every group's minimum": {spec: clusterSpec(), want: []jobintegration.Group{head,
			{Name: "ray-gpu", Template: "gpu", MinCount: 2, Size: 4, Roles: []string{"gpu"}, Parent: root},
			{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: root}}},
		"a suspended group counts no pods": {spec: suspendedGroup, want: []jobintegration.Group{head,
			{Name: "ray-gpu", Template: "gpu", MinCount: 0, Size: 0, Roles: []string{"gpu"}, Parent: root},
			{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: root}}},
		"replicas below minReplicas run minReplicas": {spec: belowMin, want: []jobintegration.Group{head,
			{Name: "ray-gpu", Template: "gpu", MinCount: 2, Size: 2, Roles: []string{"gpu"}, Parent: root},
			{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: root}}},
		"the required topology is the root's, the preferred each group's": {spec: zoned,
			annotations: map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone", lockv1.PreferredTopologyAnnotation: "example.com/rack"},
			want: func() []jobintegration.Group {
				r := &jobintegration.Composite{Name: "ray", MinGroupCount: 3, Required: []string{"topology.kubernetes.io/zone"}}
				pref := jobintegration.Topology{Preferred: []string{"example.com/rack"}}
				return []jobintegration.Group{
					{Name: "ray-head", Template: "head", MinCount: 1, Size: 1, Roles: []string{"head"}, Parent: r, Topology: pref},
					{Name: "ray-gpu", Template: "gpu", MinCount: 2, Size: 4, Roles: []string{"gpu"}, Parent: r, Topology: pref},
					{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: r, Topology: pref},
				}
			}()},
		// The shape follows minReplicas and maxReplicas, not replicas: a
		// scale to the minimum keeps the tree.
		"replicas at the minimum keep the tree": {spec: atMin, want: []jobintegration.Group{head,
			{Name: "ray-gpu", Template: "gpu", MinCount: 2, Size: 2, Roles: []string{"gpu"}, Parent: root},
			{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: root}}},
		"no group can run above its minimum: one flat gang": {spec: allNeeded,
			want: []jobintegration.Group{{Name: "ray", Template: jobintegration.TemplateName, MinCount: 7, Size: 7, Roles: []string{"head", "gpu", "cpu"}}}},
		"the min-count annotation keeps one flat gang": {spec: clusterSpec(), annotations: map[string]string{jobintegration.MinCountAnnotation: "5"},
			want: []jobintegration.Group{{Name: "ray", Template: jobintegration.TemplateName, MinCount: 5, Size: 7, Roles: []string{"head", "gpu", "cpu"}}}},
		"a worker group named head": {spec: clash, wantErr: true},
		// A tree level holds 8 children: the head and 8 worker groups do not fit.
		"more than 7 worker groups: one flat gang": {spec: wide,
			want: []jobintegration.Group{{Name: "ray", Template: jobintegration.TemplateName, MinCount: 9, Size: 13, Roles: []string{"head", "gpu", "cpu", "g0", "g1", "g2", "g3", "g4", "g5"}}}},
		"roles of one tree with different priority classes": {spec: classes, wantErr: true},
		"admission's labels keep the tree": {spec: labelled, want: []jobintegration.Group{head,
			{Name: "ray-gpu", Template: "gpu", MinCount: 2, Size: 4, Roles: []string{"gpu"}, Parent: root},
			{Name: "ray-cpu", Template: "cpu", MinCount: 0, Size: 2, Roles: []string{"cpu"}, Parent: root}}},
		"a template naming another role's group names a group of its own": {spec: foreign, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "ray", Annotations: tc.annotations}, Spec: tc.spec}
			got, err := jobintegration.Groups(Cluster{}.Wrap(rc))
			if tc.wantErr != (err != nil) {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want,+got):\n%s", diff)
			}
		})
	}
	rj := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Spec: rayv1.RayJobSpec{ClusterSelector: map[string]string{"ray.io/cluster": "shared"}}}
	if _, err := jobintegration.Groups(Job{}.Wrap(rj)); err == nil {
		t.Error("a RayJob on an existing cluster: want not a gang")
	}
}

// A RayCluster's pods belong to it; a RayJob's to the RayJob through the
// RayCluster it controls. Roles are the head and the worker groups.
func TestOwnerAndRole(t *testing.T) {
	ctl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	ofJob := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "batch-x7k2p", UID: "rc-uid", OwnerReferences: ctl("RayJob", "batch", "rj-uid")}}
	alone := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ray", UID: "alone-uid"}}
	scheme := runtime.NewScheme()
	if err := (Cluster{}).AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ofJob, alone).Build()
	pod := func(cluster string, uid types.UID, labels map[string]string) *corev1.Pod {
		labels[clusterLabel] = cluster
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: labels, OwnerReferences: ctl("RayCluster", cluster, uid)}}
	}
	head := pod("ray", "alone-uid", map[string]string{nodeTypeLabel: "head", groupLabel: "headgroup"})
	worker := pod("batch-x7k2p", "rc-uid", map[string]string{nodeTypeLabel: "worker", groupLabel: "gpu"})
	for name, tc := range map[string]struct {
		integ jobintegration.Integration
		pod   *corev1.Pod
		want  string
	}{
		"a RayCluster's head":                {integ: Cluster{}, pod: head, want: "ray"},
		"a RayJob's worker, via its cluster": {integ: Job{}, pod: worker, want: "batch"},
		"a RayCluster's pod is no RayJob's":  {integ: Job{}, pod: head},
	} {
		t.Run(name, func(t *testing.T) {
			got, _, err := tc.integ.OwnerOf(context.Background(), getter{c}, tc.pod)
			if err != nil || got != tc.want {
				t.Errorf("OwnerOf = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	s := shape{}
	if r := s.RoleOf(head); r != "head" {
		t.Errorf("head's role %q", r)
	}
	if r := s.RoleOf(worker); r != "gpu" {
		t.Errorf("worker's role %q, want its group gpu", r)
	}
}

type getter struct{ c client.Client }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return g.c.Get(ctx, key, obj)
}

// A RayCluster whose worker groups may run below their replicas is a tree
// of the head and each group; with more groups than a tree holds (7) it
// would be one flat gang that could start without its head: refused,
// saying why and what to change. Seven groups, groups at their maximum, or
// a shape the min-count annotation chose are not.
func TestTooManyElasticWorkerGroupsAreRefused(t *testing.T) {
	withGroups := func(n int, elastic bool) *rayv1.RayCluster {
		spec := rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: template()}}
		for i := range n {
			max := int32(1)
			if elastic {
				max = 4
			}
			spec.WorkerGroupSpecs = append(spec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: fmt.Sprintf("g%d", i), Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To(max), Template: template()})
		}
		return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rc"}, Spec: spec}
	}
	annotated := withGroups(8, true)
	annotated.Annotations = map[string]string{jobintegration.MinCountAnnotation: "5"}
	for name, tc := range map[string]struct {
		rc   *rayv1.RayCluster
		want bool
	}{
		"8 elastic groups":            {rc: withGroups(8, true), want: true},
		"7 elastic groups":            {rc: withGroups(7, true)},
		"8 groups at their maximum":   {rc: withGroups(8, false)},
		"8 elastic groups, min-count": {rc: annotated},
	} {
		t.Run(name, func(t *testing.T) {
			errs := Cluster{}.Wrap(tc.rc).(jobintegration.FieldValidator).ValidateFields()
			if got := len(errs) > 0; got != tc.want {
				t.Fatalf("refused %v, want %v: %v", got, tc.want, errs)
			}
			if tc.want && !strings.Contains(errs[0].Error(), "could start with workers and no head") {
				t.Errorf("refusal %q does not say why", errs[0].Error())
			}
		})
	}
}
