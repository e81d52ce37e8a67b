package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var (
	pytorchJobs = kfv1.GroupVersion.WithResource("pytorchjobs")
	mpiJobs     = mpiv2.SchemeGroupVersion.WithResource("mpijobs")
	rayClusters = rayv1.GroupVersion.WithResource("rayclusters")
	rayJobs     = rayv1.GroupVersion.WithResource("rayjobs")
)

// A PyTorchJob of a master and 2 workers, 2 GPUs each, asked for with DRA
// claims (the training operator's v1.9 CRDs carry Kubernetes 1.31's
// resource claim fields).
func TestPyTorchJobsAreGangs(t *testing.T) {
	twoInstances(t, workload{
		kind: "PyTorchJob", alias: "pytorchjob", gvr: pytorchJobs, size: 3, minCount: 3,
		selector: func(name string) string { return kfv1.JobNameLabel + "=" + name },
		make:     func(ns, name string) runtime.Object { return pytorchJob(ns, name, gpuSpec) },
	})
}

// pytorchJob is a PyTorchJob of a master and 2 workers, 2 GPUs each (asked
// for as spec asks), restarting OnFailure.
func pytorchJob(ns, name string, spec func(container string, gpus int) corev1.PodSpec) *kfv1.PyTorchJob {
	replica := func(n int32) *kfv1.ReplicaSpec {
		return &kfv1.ReplicaSpec{Replicas: ptr.To(n), RestartPolicy: kfv1.RestartPolicyOnFailure, Template: corev1.PodTemplateSpec{Spec: spec("pytorch", 2)}}
	}
	return &kfv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kfv1.GroupVersion.String(), Kind: kfv1.PyTorchJobKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kfv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
			kfv1.PyTorchJobReplicaTypeMaster: replica(1), kfv1.PyTorchJobReplicaTypeWorker: replica(2),
		}},
	}
}

// A CRD whose pod template schema predates Kubernetes 1.31 (the training
// operator's v1.8.1 and earlier) drops a template claim's
// resourceClaimTemplateName, leaving a claim that names no source: Lockstep
// refuses such a PyTorchJob, saying so, instead of leaving every pod to be
// refused by the API server. The claim is sent as such a CRD leaves it.
func TestPyTorchJobWithAClaimOfNoSourceIsRefused(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	spec := gpuSpec("pytorch", 1)
	spec.ResourceClaims[0].ResourceClaimTemplateName = nil
	job := &kfv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kfv1.GroupVersion.String(), Kind: kfv1.PyTorchJobKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claims"},
		Spec: kfv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
			kfv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: spec}},
		}},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Dynamic.Resource(pytorchJobs).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "CRD's pod template schema is older than Kubernetes 1.31's") {
		t.Errorf("want the PyTorchJob refused, naming the pruned claim source; got %v", err)
	}
}

// mpiJob is an MPIJob of a launcher (no GPU) and 3 workers of 2 GPUs.
func mpiJob(ns, name string, policy mpiv2.LauncherCreationPolicy) *mpiv2.MPIJob {
	return &mpiv2.MPIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: mpiv2.SchemeGroupVersion.String(), Kind: mpiv2.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mpiv2.MPIJobSpec{LauncherCreationPolicy: policy, MPIReplicaSpecs: map[mpiv2.MPIReplicaType]*mpiv2.ReplicaSpec{
			mpiv2.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: gpuSpec("launcher", 0)}},
			mpiv2.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{Spec: gpuSpec("worker", 2)}},
		}},
	}
}

// An MPIJob whose launcher is created with its workers (the default): the
// launcher is in the gang, placed only with every worker.
func TestMPIJobsAreGangs(t *testing.T) {
	twoInstances(t, workload{
		kind: "MPIJob", alias: "mpijob", gvr: mpiJobs, size: 4, minCount: 4,
		selector: func(name string) string { return mpiv2.JobNameLabel + "=" + name },
		make: func(ns, name string) runtime.Object {
			return mpiJob(ns, name, mpiv2.LauncherCreationPolicyAtStartup)
		},
	})
}

// An MPIJob whose minAvailable (3) is below its size (4) is a tree, so its
// launcher is never left out of "any 3 pods": the launcher's PodGroup in
// full and the workers' at 2, under a root that needs both; the MPI
// operator's pods (the launcher through its Job) each join their role's
// group and bind.
func TestMPIJobTreeKeepsItsLauncher(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	job := mpiJob(ns, "tree", mpiv2.LauncherCreationPolicyAtStartup)
	job.Spec.RunPolicy.SchedulingPolicy = &mpiv2.SchedulingPolicy{MinAvailable: ptr.To[int32](3)}
	create(t, ctx, h, mpiJobs, job)
	h.WaitRunning(t, ctx, ns, "tree-launcher", 1)
	h.WaitRunning(t, ctx, ns, "tree-worker", 3)
	for name, want := range map[string]int32{"tree-launcher": 1, "tree-worker": 2} {
		pg, err := h.PodGroup(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != want || ptr.Deref(pg.Spec.ParentCompositePodGroupName, "") != "tree" {
			t.Errorf("PodGroup %s spec: want minCount %d under CompositePodGroup tree, got %+v", name, want, pg.Spec)
		}
	}
	treeScheduled(t, ctx, h, ns, "tree")
}

// With launcherCreationPolicy WaitForWorkersReady the operator creates the
// launcher only once every worker is ready: the gang is the workers alone
// (a gang counting the launcher, as the operator's own PodGroups do, could
// never start), and the launcher is then scheduled by itself.
func TestMPIJobLauncherAfterWorkersIsNoDeadlock(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	create(t, ctx, h, mpiJobs, mpiJob(ns, "later", mpiv2.LauncherCreationPolicyWaitForWorkersReady))
	harness.Eventually(t, ctx, "3 workers bound in the gang, then the launcher bound alone", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mpiv2.JobNameLabel + "=later"})
		if err != nil {
			return false, "", err
		}
		workers, launcher, state := 0, false, ""
		for _, p := range pods.Items {
			g, bound := p.Labels[lockv1.PodGroupLabel], p.Spec.NodeName != ""
			switch p.Labels[mpiv2.JobRoleLabel] {
			case "worker":
				if bound && g == "later" {
					workers++
				}
			case "launcher":
				launcher = bound && g == ""
			}
			state += fmt.Sprintf(" %s(group %q, node %q)", p.Name, g, p.Spec.NodeName)
		}
		return workers == 3 && launcher, state, nil
	})
	pg, err := h.PodGroup(ctx, ns, "later")
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 3 {
		t.Errorf("PodGroup spec: want a gang of the 3 workers, got %+v", pg.Spec)
	}
	// The launcher's Job is the MPIJob's part, not a gang of its own.
	if _, err := h.PodGroup(ctx, ns, "later-launcher"); !apierrors.IsNotFound(err) {
		t.Errorf("the launcher Job has a PodGroup of its own (err %v)", err)
	}
}

// rayCluster is a head (no GPU) and a worker group of 3 × 2 GPUs, all
// required (minReplicas = maxReplicas = 3): one flat gang of all 4 pods.
func rayCluster() rayv1.RayClusterSpec {
	return rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{RayStartParams: map[string]string{}, Template: corev1.PodTemplateSpec{Spec: gpuSpec("ray-head", 0)}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
			GroupName: "gpu", Replicas: ptr.To[int32](3), MinReplicas: ptr.To[int32](3), MaxReplicas: ptr.To[int32](3),
			RayStartParams: map[string]string{}, Template: corev1.PodTemplateSpec{Spec: gpuSpec("ray-worker", 2)},
		}},
	}
}

func TestRayClustersAreGangs(t *testing.T) {
	twoInstances(t, workload{
		kind: "RayCluster", alias: "raycluster", gvr: rayClusters, size: 4, minCount: 4,
		selector: func(name string) string { return "ray.io/cluster=" + name },
		make: func(ns, name string) runtime.Object {
			return &rayv1.RayCluster{
				TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       rayCluster(),
			}
		},
	})
}

// A RayJob's cluster (a RayCluster the RayJob controls, named by KubeRay)
// is the RayJob's gang, named after the RayJob; the RayCluster has none of
// its own.
func TestRayJobIsAGang(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	spec := rayCluster()
	create(t, ctx, h, rayJobs, &rayv1.RayJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
		Spec:       rayv1.RayJobSpec{Entrypoint: "python train.py", RayClusterSpec: &spec},
	})
	var cluster string
	harness.Eventually(t, ctx, "the RayJob's 4 pods bound in its group", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=batch"})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
			cluster = p.Labels["ray.io/cluster"]
		}
		return len(pods.Items) == 4 && bound == 4, fmt.Sprintf("%d pods, %d bound", len(pods.Items), bound), nil
	})
	pg, err := h.PodGroup(ctx, ns, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].Kind != "RayJob" {
		t.Errorf("PodGroup owner: want RayJob batch, got %+v", pg.OwnerReferences)
	}
	if _, err := h.PodGroup(ctx, ns, cluster); !apierrors.IsNotFound(err) {
		t.Errorf("the RayJob's RayCluster %s has a PodGroup of its own (err %v)", cluster, err)
	}
	if r := h.Explain(t, ns, "rayjob", "batch"); r.Unit != "PodGroup "+ns+"/batch" || !r.Gang || r.MinCount != 4 || r.Bound != 4 {
		t.Errorf("explain rayjob batch: unit %q gang %v minCount %d bound %d", r.Unit, r.Gang, r.MinCount, r.Bound)
	}
}

// Scaling a running Ray cluster's workers down to its minimum and up again
// (as the Ray autoscaler does) never restarts it: the pods that stay keep
// running, the new workers join the running tree. Its workers may run
// above their minimum (1 of up to 6), so it is a tree: the head's gang of
// 1 and the gpu group's gang of 1 under a root that needs both.
func TestRayClusterResizeRestartsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	spec := rayCluster()
	spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](1)
	spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](6)
	create(t, ctx, h, rayClusters, &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elastic"},
		Spec:       spec,
	})
	head := h.WaitRunning(t, ctx, ns, "elastic-head", 1)
	before := h.WaitRunning(t, ctx, ns, "elastic-gpu", 3)
	pg, err := h.PodGroup(ctx, ns, "elastic-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 1 || ptr.Deref(pg.Spec.ParentCompositePodGroupName, "") != "elastic" {
		t.Errorf("PodGroup elastic-gpu spec: want minCount 1 (1 required worker) under CompositePodGroup elastic, got %+v", pg.Spec)
	}
	scale := func(n int) {
		patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":%d}]`, n)
		if _, err := h.Dynamic.Resource(rayClusters).Namespace(ns).Patch(ctx, "elastic", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(1)
	kept := h.WaitRunning(t, ctx, ns, "elastic-gpu", 1)
	for uid := range kept {
		if _, ok := before[uid]; !ok {
			t.Errorf("pod %s is new after a scale-down: a member was restarted", uid)
		}
	}
	scale(3)
	after := h.WaitRunning(t, ctx, ns, "elastic-gpu", 3)
	for uid := range kept {
		if _, ok := after[uid]; !ok {
			t.Errorf("pod %s stopped running when the cluster scaled up", uid)
		}
	}
	if still := h.WaitRunning(t, ctx, ns, "elastic-head", 1); !cmp.Equal(head, still) {
		t.Errorf("the head was replaced while the workers scaled: before %v, after %v", head, still)
	}
	h.NoLifecycleRestart(t, ctx, ns, "elastic-head")
	h.NoLifecycleRestart(t, ctx, ns, "elastic-gpu")
}

// The coordinator is never left out (issue 25): a RayCluster whose GPU
// workers have minReplicas 0 is a tree whose root needs the head, so on a
// pool where the head cannot fit (every node's CPU is held by another pod)
// no worker binds, though the workers would fit; the root says it does not
// fit. When a node frees its CPU, the head and the workers bind together.
func TestRayHeadIsNeverLeftOut(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	for i := range 4 {
		// 10 of each node's 16 CPUs: a head of 8 fits nowhere, a worker of 1 does.
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("hog-%d", i)).Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "10").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "the 4 CPU hogs bound", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 4, fmt.Sprintf("%d bound", bound), nil
	})
	spec := rayCluster()
	head := &spec.HeadGroupSpec.Template.Spec.Containers[0].Resources
	head.Requests[corev1.ResourceCPU], head.Limits[corev1.ResourceCPU] = resource.MustParse("8"), resource.MustParse("8")
	spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
	spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](0)
	spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](4)
	create(t, ctx, h, rayClusters, &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "coord"},
		Spec:       spec,
	})
	harness.Eventually(t, ctx, "the tree judged: it does not fit", func(ctx context.Context) (bool, string, error) {
		c, err := compositeCondition(ctx, h, ns, "coord")
		if err != nil || c == nil {
			return false, "no condition yet", client.IgnoreNotFound(err)
		}
		return c.Status == metav1.ConditionFalse && c.Reason == lockv1.PodGroupReasonUnschedulable, c.Reason + ": " + c.Message, nil
	})
	for _, g := range []string{"coord-head", "coord-gpu"} {
		pods, bound, err := h.GroupPods(ctx, ns, g)
		if err != nil {
			t.Fatal(err)
		}
		if bound != 0 || len(pods) == 0 {
			t.Errorf("group %s: %d of %d pods bound while the head does not fit, want none bound", g, bound, len(pods))
		}
	}
	if err := h.Client.CoreV1().Pods(ns).Delete(ctx, "hog-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning(t, ctx, ns, "coord-head", 1)
	h.WaitRunning(t, ctx, ns, "coord-gpu", 2)
	treeScheduled(t, ctx, h, ns, "coord")
}

// treeScheduled waits for the CompositePodGroup's
// CompositePodGroupInitiallyScheduled condition to be True.
func treeScheduled(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string) {
	t.Helper()
	harness.Eventually(t, ctx, "CompositePodGroup "+name+" scheduled", func(ctx context.Context) (bool, string, error) {
		c, err := compositeCondition(ctx, h, ns, name)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message, nil
	})
}

// compositeCondition is a Lockstep CompositePodGroup's
// CompositePodGroupInitiallyScheduled condition (nil if none yet).
func compositeCondition(ctx context.Context, h *harness.Harness, ns, name string) (*metav1.Condition, error) {
	u, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	c := &lockv1.CompositePodGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled), nil
}
