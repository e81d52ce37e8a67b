package integrations

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// What a gang restart costs each kind that has a budget of its own, warned
// at admission where the kind allows no free restart (issue 38): a Kubeflow
// replica restarting Never (the operator fails the job on a deleted pod), an
// MPI launcher restarting OnFailure (its Job can carry no rule), a RayJob
// (KubeRay never recreates its head). The settings that make it free warn
// nothing.
func TestRestartBudgetWarningsPerKind(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}
	pytorch := func(worker kfv1.RestartPolicy) client.Object {
		return &kfv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ddp"}, Spec: kfv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
			kfv1.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), RestartPolicy: kfv1.RestartPolicyOnFailure, Template: tmpl},
			kfv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To[int32](3), RestartPolicy: worker, Template: tmpl}}}}
	}
	mpi := func(launcher mpiv2.RestartPolicy) client.Object {
		return &mpiv2.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hvd"}, Spec: mpiv2.MPIJobSpec{MPIReplicaSpecs: map[mpiv2.MPIReplicaType]*mpiv2.ReplicaSpec{
			mpiv2.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), RestartPolicy: launcher, Template: tmpl},
			mpiv2.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](4), Template: tmpl}}}}
	}
	rayJob := func(limit *int32) client.Object {
		return &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "tune"}, Spec: rayv1.RayJobSpec{BackoffLimit: limit,
			RayClusterSpec: &rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: tmpl},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "gpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](2), Template: tmpl}}}}}
	}
	all := All()
	for name, tc := range map[string]struct {
		obj  client.Object
		want string // a substring of the one warning, "" for none
	}{
		"PyTorchJob, workers Never":     {obj: pytorch(kfv1.RestartPolicyNever), want: "replica Worker has restartPolicy Never: the operator fails the PyTorchJob when a pod of it is deleted"},
		"PyTorchJob, workers OnFailure": {obj: pytorch(kfv1.RestartPolicyOnFailure)},
		"PyTorchJob, workers ExitCode":  {obj: pytorch(kfv1.RestartPolicyExitCode)},
		"MPIJob, launcher by default":   {obj: mpi(""), want: "the launcher has restartPolicy OnFailure: its Job can carry no podFailurePolicy"},
		"MPIJob, launcher Never":        {obj: mpi(mpiv2.RestartPolicyNever)},
		"MPIJob, launcher ExitCode":     {obj: mpi(mpiv2.RestartPolicyExitCode)},
		"RayJob, no retries":            {obj: rayJob(nil), want: "fails the RayJob (spec.backoffLimit is 0)"},
		"RayJob, 2 retries":             {obj: rayJob(ptr.To[int32](2)), want: "costs the RayJob one of its 2 retries"},
	} {
		t.Run(name, func(t *testing.T) {
			gvk, err := apiutil.GVKForObject(tc.obj, Scheme())
			if err != nil {
				t.Fatal(err)
			}
			j := all.ForKind(gvk.GroupVersion().String(), gvk.Kind).Wrap(tc.obj)
			if c := all.Classify(j); !jobintegration.RestartsWhole(c.Class) {
				t.Fatalf("class %s: Lockstep would not restart it whole", c.Class)
			}
			b, ok := j.(jobintegration.RestartBudgeter)
			if !ok {
				t.Fatalf("%T says nothing of its restart budget", j)
			}
			if set := b.DefaultRestartBudget(); set != nil {
				t.Errorf("changed %v: only a Job's budget is defaulted", set)
			}
			got := b.RestartBudgetWarnings()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("want no warning, got %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("want one warning containing %q, got %q", tc.want, got)
			}
		})
	}
}
