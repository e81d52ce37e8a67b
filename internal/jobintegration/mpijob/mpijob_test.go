package mpijob

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

func spec(n int32) *mpiv2.ReplicaSpec {
	return &mpiv2.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}}
}

func mpiJob(workers int32, policy mpiv2.LauncherCreationPolicy) *mpiv2.MPIJob {
	return &mpiv2.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "allreduce", UID: "mpi-uid"},
		Spec: mpiv2.MPIJobSpec{LauncherCreationPolicy: policy, MPIReplicaSpecs: map[mpiv2.MPIReplicaType]*mpiv2.ReplicaSpec{
			mpiv2.MPIReplicaTypeLauncher: spec(1), mpiv2.MPIReplicaTypeWorker: spec(workers),
		}},
	}
}

// The launcher is in the gang when it is created with the workers, and
// scheduled alone when it is created only once they are ready (counting it
// would be the launcher deadlock).
func TestGroups(t *testing.T) {
	withMin := func(n int32, policy mpiv2.LauncherCreationPolicy) *mpiv2.MPIJob {
		j := mpiJob(4, policy)
		j.Spec.RunPolicy.SchedulingPolicy = &mpiv2.SchedulingPolicy{MinAvailable: ptr.To(n)}
		return j
	}
	root := &jobintegration.Composite{Name: "allreduce", MinGroupCount: 2}
	for name, tc := range map[string]struct {
		job          *mpiv2.MPIJob
		want         []jobintegration.Group
		launcherJoin string
		workerJoin   string
	}{
		// A flat gang of "any 3 of 5" could start without the launcher.
		"AtStartup, minAvailable below the size: a tree with the launcher in full": {job: withMin(3, mpiv2.LauncherCreationPolicyAtStartup),
			want: []jobintegration.Group{
				{Name: "allreduce-launcher", Template: "launcher", MinCount: 1, Size: 1, Roles: []string{"launcher"}, Parent: root},
				{Name: "allreduce-worker", Template: "worker", MinCount: 2, Size: 4, Roles: []string{"worker"}, Parent: root}},
			launcherJoin: "allreduce-launcher", workerJoin: "allreduce-worker"},
		"WaitForWorkersReady, minAvailable below the size: the workers' flat gang": {job: withMin(3, mpiv2.LauncherCreationPolicyWaitForWorkersReady),
			want: []jobintegration.Group{{Name: "allreduce", Template: jobintegration.TemplateName, MinCount: 3, Size: 4, Roles: []string{"worker"}}}},
		"AtStartup: launcher and workers together": {job: mpiJob(4, mpiv2.LauncherCreationPolicyAtStartup),
			want:         []jobintegration.Group{{Name: "allreduce", Template: jobintegration.TemplateName, MinCount: 5, Size: 5, Roles: []string{"launcher", "worker"}}},
			launcherJoin: "allreduce"},
		"WaitForWorkersReady: the workers alone": {job: mpiJob(4, mpiv2.LauncherCreationPolicyWaitForWorkersReady),
			want: []jobintegration.Group{{Name: "allreduce", Template: jobintegration.TemplateName, MinCount: 4, Size: 4, Roles: []string{"worker"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			j := Integration{}.Wrap(tc.job)
			got, err := jobintegration.Groups(j)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want,+got):\n%s", diff)
			}
			launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mpiv2.JobRoleLabel: "launcher"}}}
			if g := jobintegration.GroupOf(j, got, launcher); g != tc.launcherJoin {
				t.Errorf("the launcher joins %q, want %q", g, tc.launcherJoin)
			}
			worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{mpiv2.JobRoleLabel: "worker"}}}
			if tc.workerJoin == "" {
				tc.workerJoin = "allreduce"
			}
			if g := jobintegration.GroupOf(j, got, worker); g != tc.workerJoin {
				t.Errorf("a worker joins %q, want %q", g, tc.workerJoin)
			}
		})
	}
}

func TestValidateFields(t *testing.T) {
	for name, tc := range map[string]struct {
		policy       mpiv2.LauncherCreationPolicy
		minAvailable int32
		wantErr      string
	}{
		"AtStartup counts the launcher":             {policy: mpiv2.LauncherCreationPolicyAtStartup, minAvailable: 5},
		"WaitForWorkersReady, the workers":          {policy: mpiv2.LauncherCreationPolicyWaitForWorkersReady, minAvailable: 4},
		"WaitForWorkersReady counting the launcher": {policy: mpiv2.LauncherCreationPolicyWaitForWorkersReady, minAvailable: 5, wantErr: "would wait for it forever"},
		"more than every pod":                       {policy: mpiv2.LauncherCreationPolicyAtStartup, minAvailable: 6, wantErr: "must be between 1 and the 5 pods"},
	} {
		t.Run(name, func(t *testing.T) {
			m := mpiJob(4, tc.policy)
			m.Spec.RunPolicy.SchedulingPolicy = &mpiv2.SchedulingPolicy{MinAvailable: ptr.To(tc.minAvailable)}
			errs := Integration{}.Wrap(m).(jobintegration.FieldValidator).ValidateFields()
			if tc.wantErr == "" {
				if len(errs) != 0 {
					t.Errorf("want no error, got %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr) {
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

// A worker belongs to the MPIJob that controls it; the launcher's pod
// through the launcher Job the MPIJob controls; a Job's pod that merely
// carries the launcher label belongs to no MPIJob.
func TestOwnerOf(t *testing.T) {
	ctl := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	launcherJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "allreduce-launcher", UID: "launcher-job-uid",
		OwnerReferences: ctl("kubeflow.org/v2beta1", "MPIJob", "allreduce", "mpi-uid")}}
	plainJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain", UID: "plain-uid"}}
	c := fake.NewClientBuilder().WithObjects(launcherJob, plainJob).Build()
	launcherLabels := map[string]string{mpiv2.JobRoleLabel: "launcher"}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"a worker": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{mpiv2.JobRoleLabel: "worker"},
			OwnerReferences: ctl("kubeflow.org/v2beta1", "MPIJob", "allreduce", "mpi-uid")}}, want: "allreduce"},
		"the launcher": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: launcherLabels,
			OwnerReferences: ctl("batch/v1", "Job", "allreduce-launcher", "launcher-job-uid")}}, want: "allreduce"},
		"a plain Job's pod labelled as a launcher": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: launcherLabels,
			OwnerReferences: ctl("batch/v1", "Job", "plain", "plain-uid")}}},
		"a stale reference to a launcher Job": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: launcherLabels,
			OwnerReferences: ctl("batch/v1", "Job", "allreduce-launcher", "old-uid")}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, _, err := Integration{}.OwnerOf(context.Background(), getter{c}, tc.pod)
			if err != nil || got != tc.want {
				t.Errorf("OwnerOf = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

type getter struct{ c client.Client }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return g.c.Get(ctx, key, obj)
}
