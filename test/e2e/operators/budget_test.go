package operators

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// restartWhole creates an instance of w named name and restarts its gang
// through one GPU reported Unhealthy: the operator must recreate every
// member Lockstep takes down.
func restartWhole(t *testing.T, ctx context.Context, h *harness.Harness, ns string, w workload, name string) {
	t.Helper()
	gpuTemplates(t, ctx, h, ns)
	create(t, ctx, h, w.gvr, w.make(ns, name))
	t.Logf("%s ran again whole %s after the restart", w.kind, h.RestartOnUnhealthyDevice(t, ctx, ns, name, w.size).Round(100*time.Millisecond))
}

// A gang restart costs an MPIJob nothing when its launcher restarts Never
// (issue 38): the launcher's Job, which the MPI operator creates, is given
// the rule that ignores disruptions at its creation; one worker's GPU
// reported Unhealthy restarts the gang whole — the operator recreates the
// workers, the launcher's Job its pod — with no failure counted by the
// launcher's Job (runPolicy.backoffLimit 0 would fail the MPIJob on one) and
// the MPIJob not failed.
func TestMPIJobGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	w := workload{kind: "MPIJob", gvr: mpiJobs, size: 4,
		selector: func(name string) string { return mpiv2.JobNameLabel + "=" + name },
		make: func(ns, name string) runtime.Object {
			j := mpiJob(ns, name, mpiv2.LauncherCreationPolicyAtStartup)
			j.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeLauncher].RestartPolicy = mpiv2.RestartPolicyNever
			j.Spec.RunPolicy.BackoffLimit = new(int32)
			return j
		}}
	restartWhole(t, ctx, h, ns, w, "hvd")
	launcher, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "hvd-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := launcher.Spec.PodFailurePolicy; p == nil || len(p.Rules) != 1 || p.Rules[0].Action != batchv1.PodFailurePolicyActionIgnore {
		t.Errorf("the launcher's Job: want the rule that ignores disruptions, got %+v", p)
	}
	if launcher.Status.Failed != 0 {
		t.Errorf("the gang restart cost the launcher's Job %d failures", launcher.Status.Failed)
	}
	job := &mpiv2.MPIJob{}
	u, err := h.Dynamic.Resource(mpiJobs).Namespace(ns).Get(ctx, "hvd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
		t.Fatal(err)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == mpiv2.JobFailed && c.Status == corev1.ConditionTrue {
			t.Errorf("the gang restart failed the MPIJob: %s", c.Message)
		}
	}
}

// A gang restart costs a RayCluster nothing: KubeRay recreates the head and
// the workers Lockstep took down, and the cluster runs again whole.
func TestRayClusterGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	restartWhole(t, ctx, h, ns, workload{kind: "RayCluster", gvr: rayClusters, size: 4,
		selector: func(name string) string { return "ray.io/cluster=" + name },
		make: func(ns, name string) runtime.Object {
			return &rayv1.RayCluster{
				TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       rayCluster(),
			}
		}}, "ray")
}

// A gang restart costs a PyTorchJob nothing when its replicas restart
// OnFailure (the operator's default): the training operator recreates
// every pod Lockstep takes down — its GPUs are an extended resource a DRA
// DeviceClass serves, reported Unhealthy as the kubelet does — and the job
// runs again whole, not failed. (A replica restarting Never would fail it;
// admission warns.)
func TestPyTorchJobGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.CreateDeviceClass(ctx, t, builders.ExtendedResourceClass("gpu-extended", "gpu.example.com", string(extendedGPU)))
	restartWhole(t, ctx, h, ns, workload{kind: "PyTorchJob", gvr: pytorchJobs, size: 3,
		selector: func(name string) string { return kfv1.JobNameLabel + "=" + name },
		make:     func(ns, name string) runtime.Object { return pytorchJob(ns, name, extendedGPUSpec) }}, "ddp")
	u, err := h.Dynamic.Resource(pytorchJobs).Namespace(ns).Get(ctx, "ddp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := &kfv1.PyTorchJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
		t.Fatal(err)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == kfv1.JobFailed && c.Status == corev1.ConditionTrue {
			t.Errorf("the gang restart failed the PyTorchJob: %s", c.Message)
		}
	}
}
