package integrations

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func controlledBy(apiVersion, kind, name string, uid types.UID) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "team-a", OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}}
}

// An object another integration controls is part of that one's gang, never
// a gang of its own: an MPI launcher Job, a RayJob's RayCluster, a JobSet's
// Job. A Job of its own is.
func TestChildrenAreNotGangs(t *testing.T) {
	lockstep := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}
	job := func(meta metav1.ObjectMeta) client.Object {
		meta.Name = "j"
		return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), Template: lockstep}}
	}
	cluster := &rayv1.RayCluster{ObjectMeta: controlledBy("ray.io/v1", "RayJob", "batch", "rj"), Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: lockstep}}}
	cluster.Name = "batch-x7k2p"
	trainJobs := &jobsetv1.JobSet{ObjectMeta: controlledBy("trainer.kubeflow.org/v1alpha1", "TrainJob", "llama", "tj"), Spec: jobsetv1.JobSetSpec{
		ReplicatedJobs: []jobsetv1.ReplicatedJob{{Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), Template: lockstep}}}},
	}}
	trainJobs.Name = "llama"
	all := All()
	for name, tc := range map[string]struct {
		obj  client.Object
		gang bool
	}{
		"a Job of its own":      {obj: job(metav1.ObjectMeta{Namespace: "team-a"}), gang: true},
		"an MPI launcher Job":   {obj: job(controlledBy("kubeflow.org/v2beta1", "MPIJob", "allreduce", "m"))},
		"a JobSet's Job":        {obj: job(controlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "js", "s"))},
		"a RayJob's RayCluster": {obj: cluster},
		"a RayJob's submitter":  {obj: job(controlledBy("ray.io/v1", "RayJob", "batch", "rj"))},
		// A TrainJob is no integration: the JobSet it runs as is the gang.
		"a TrainJob's JobSet": {obj: trainJobs, gang: true},
	} {
		t.Run(name, func(t *testing.T) {
			integ := all.ForKind("batch/v1", "Job")
			switch tc.obj.(type) {
			case *rayv1.RayCluster:
				integ = all.ForKind("ray.io/v1", "RayCluster")
			case *jobsetv1.JobSet:
				integ = all.ForKind("jobset.x-k8s.io/v1alpha2", "JobSet")
			}
			if got := all.Gang(integ.Wrap(tc.obj)); got != tc.gang {
				t.Errorf("Gang = %v, want %v", got, tc.gang)
			}
		})
	}
}

// A pod is claimed by the integration of the job it belongs to, even where
// another's would claim it first by its immediate controller: an MPI
// launcher's pod (controlled by a Job) is the MPIJob's, a RayJob's pod
// (controlled by a RayCluster) the RayJob's.
func TestOwnerOfFollowsTheChain(t *testing.T) {
	launcherJob := &batchv1.Job{ObjectMeta: controlledBy("kubeflow.org/v2beta1", "MPIJob", "allreduce", "mpi-uid")}
	launcherJob.Name, launcherJob.UID = "allreduce-launcher", "launcher-uid"
	rc := &rayv1.RayCluster{ObjectMeta: controlledBy("ray.io/v1", "RayJob", "batch", "rj-uid")}
	rc.Name, rc.UID = "batch-x7k2p", "rc-uid"
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(launcherJob, rc).Build()
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		kind, name string
	}{
		"an MPI launcher's pod": {pod: &corev1.Pod{ObjectMeta: controlledBy("batch/v1", "Job", "allreduce-launcher", "launcher-uid")}, kind: "MPIJob", name: "allreduce"},
		"a RayJob's pod":        {pod: &corev1.Pod{ObjectMeta: controlledBy("ray.io/v1", "RayCluster", "batch-x7k2p", "rc-uid")}, kind: "RayJob", name: "batch"},
		"a Job's pod":           {pod: &corev1.Pod{ObjectMeta: controlledBy("batch/v1", "Job", "plain", "plain-uid")}, kind: "Job", name: "plain"},
	} {
		t.Run(name, func(t *testing.T) {
			switch tc.kind {
			case "MPIJob":
				tc.pod.Labels = map[string]string{"training.kubeflow.org/job-role": "launcher"}
			case "RayJob":
				tc.pod.Labels = map[string]string{"ray.io/cluster": "batch-x7k2p"}
			}
			owner, err := All().OwnerOf(context.Background(), getter{c}, tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if owner == nil || owner.Integration.GVK().Kind != tc.kind || owner.Name != tc.name {
				t.Errorf("owner %+v, want %s %s", owner, tc.kind, tc.name)
			}
		})
	}
}

type getter struct{ c client.Client }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return g.c.Get(ctx, key, obj)
}

// explain names a TrainJob by the JobSet integration it runs as; an
// integration's own alias is no wrapper.
func TestWrapperForAlias(t *testing.T) {
	all := All()
	for alias, want := range map[string]string{"trainjob": "TrainJob/jobset", "trainjobs": "TrainJob/jobset", "jobset": "", "pytorchjob": ""} {
		got := ""
		if w, integ := all.WrapperForAlias(alias); w != nil {
			got = w.GVK.Kind + "/" + integ.Name()
		}
		if got != want {
			t.Errorf("WrapperForAlias(%q) = %q, want %q", alias, got, want)
		}
	}
}
