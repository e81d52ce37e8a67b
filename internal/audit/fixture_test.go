package audit

import (
	"fmt"
	"time"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Fixtures: objects as the API server returns them, times in seconds after
// t0.

const ns = "ml"

var t0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

func at(sec int) time.Time      { return t0.Add(time.Duration(sec) * time.Second) }
func mt(sec int) metav1.Time    { return metav1.NewTime(at(sec)) }
func uid(name string) types.UID { return types.UID(name + "-uid") }

// podW builds a pod: created at t0, default scheduler, one container.
type podW struct{ *corev1.Pod }

func pod(name string) podW {
	p := builders.MakePod().Namespace(ns).Name(name).Scheduler(corev1.DefaultSchedulerName).Obj()
	p.UID = uid(name)
	p.CreationTimestamp = mt(0)
	p.Status.Phase = corev1.PodPending
	return podW{p}
}

func (w podW) obj() *corev1.Pod { return w.Pod }

// of makes kind/name (apiVersion) the pod's controller.
func (w podW) of(apiVersion, kind, name string) podW {
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid(name), Controller: ptr.To(true)}}
	return w
}

func (w podW) ofJob(job string) podW {
	return w.of("batch/v1", "Job", job).label(batchv1.JobNameLabel, job)
}

func (w podW) label(k, v string) podW {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

func (w podW) created(sec int) podW { w.CreationTimestamp = mt(sec); return w }

func (w podW) scheduler(name string) podW { w.Spec.SchedulerName = name; return w }

func (w podW) generateName(gn string) podW { w.GenerateName = gn; return w }

// bound: scheduled at sec, running.
func (w podW) bound(sec int) podW {
	w.Spec.NodeName = "node-0"
	w.Status.Phase = corev1.PodRunning
	w.Status.StartTime = ptr.To(mt(sec))
	w.setCondition(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: mt(sec)})
	return w
}

// unschedulable: the scheduler found no node at sec.
func (w podW) unschedulable(sec int) podW {
	w.setCondition(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: mt(sec)})
	return w
}

// finished: its container ended at sec, the pod Succeeded or Failed.
func (w podW) finished(sec int, phase corev1.PodPhase) podW {
	w.Status.Phase = phase
	w.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: mt(sec)}}}}
	return w
}

func (w podW) disrupted(sec int, reason string) podW {
	w.setCondition(corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: "preempted by a higher-priority pod", LastTransitionTime: mt(sec)})
	return w
}

func (w podW) req(name string, qty string) podW {
	c := &w.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests, c.Resources.Limits = corev1.ResourceList{}, corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceName(name)] = builders.Quantity(qty)
	c.Resources.Limits[corev1.ResourceName(name)] = builders.Quantity(qty)
	return w
}

// claim: the pod's claim "gpu" from template one-gpu, generated as
// ResourceClaim name.
func (w podW) claim(name string) podW {
	w.Spec.ResourceClaims = append(w.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")})
	w.Status.ResourceClaimStatuses = append(w.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "gpu", ResourceClaimName: ptr.To(name)})
	return w
}

// sharedClaim: the pod uses the existing ResourceClaim name.
func (w podW) sharedClaim(name string) podW {
	w.Spec.ResourceClaims = append(w.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To(name)})
	return w
}

func (w podW) setCondition(c corev1.PodCondition) {
	for i := range w.Status.Conditions {
		if w.Status.Conditions[i].Type == c.Type {
			w.Status.Conditions[i] = c
			return
		}
	}
	w.Status.Conditions = append(w.Status.Conditions, c)
}

// gpuClaim is a claim for n devices of class gpu.example.com, allocated
// when allocated.
func gpuClaim(name string, n int, allocated bool) *resourcev1.ResourceClaim {
	c := builders.Claim(ns, name, "gpu.example.com", int64(n))
	if allocated {
		c.Status.Allocation = &resourcev1.AllocationResult{}
		for i := 0; i < n; i++ {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourcev1.DeviceRequestAllocationResult{Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: "node-0", Device: fmt.Sprintf("gpu-%d", i)})
		}
	}
	return c
}

func oneGPUTemplate() *resourcev1.ResourceClaimTemplate {
	return builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1)
}

// indexedJob is an Indexed Job of n ranks whose pods name scheduler.
func indexedJob(name string, n int32, scheduler string) *batchv1.Job {
	j := builders.IndexedJob(ns, name, n, builders.MakePod().Scheduler(scheduler).Obj())
	j.UID = uid(name)
	return j
}

// ranks are n pods of job, rank i built by f from a pod named
// <job>-<i>-xxxxx (generateName <job>-<i>-).
func ranks(job string, n int, f func(i int, w podW) podW) []*corev1.Pod {
	var out []*corev1.Pod
	for i := 0; i < n; i++ {
		w := pod(fmt.Sprintf("%s-%d-abcde", job, i)).generateName(fmt.Sprintf("%s-%d-", job, i)).ofJob(job).
			label(batchv1.JobCompletionIndexAnnotation, fmt.Sprint(i))
		out = append(out, f(i, w).obj())
	}
	return out
}

// partialRanks: ranks 0..bound-1 bound at 2 s, the rest unschedulable,
// each asking for one extended resource res.
func partialRanks(job string, n, bound int, res string) []*corev1.Pod {
	return ranks(job, n, func(i int, w podW) podW {
		w = w.req(res, "1")
		if i < bound {
			return w.bound(2)
		}
		return w.unschedulable(3)
	})
}

// draRanks: like partialRanks with a claim per rank (allocated when
// bound), returned with the claims.
func draRanks(job string, n, bound int) ([]*corev1.Pod, []*resourcev1.ResourceClaim) {
	var claims []*resourcev1.ResourceClaim
	pods := ranks(job, n, func(i int, w podW) podW {
		name := fmt.Sprintf("%s-%d-gpu", job, i)
		claims = append(claims, gpuClaim(name, 1, i < bound))
		w = w.claim(name)
		if i < bound {
			return w.bound(2)
		}
		return w.unschedulable(3)
	})
	return pods, claims
}

func gangPodGroup(name string, minCount int32) *lockv1.PodGroup {
	pg := builders.GangPodGroup(ns, name, minCount)
	pg.UID = uid(name)
	return pg
}

func jobSet(name string) (*jobsetv1.JobSet, []*batchv1.Job) {
	tmpl := builders.MakePod().Scheduler(corev1.DefaultSchedulerName).Obj()
	js := builders.JobSet(ns, name, builders.ReplicatedJob("driver", 1, 1, tmpl), builders.ReplicatedJob("workers", 1, 3, tmpl))
	js.UID = uid(name)
	var jobs []*batchv1.Job
	for _, rj := range []string{"driver", "workers"} {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + rj + "-0", UID: uid(name + "-" + rj + "-0")}}
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: jobsetv1.GroupVersion.String(), Kind: "JobSet", Name: name, UID: js.UID, Controller: ptr.To(true)}}
		jobs = append(jobs, j)
	}
	return js, jobs
}

func pyTorchJob(name string, workers int32) *kfv1.PyTorchJob {
	spec := func(n int32) *kfv1.ReplicaSpec {
		return &kfv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}}
	}
	return &kfv1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(name)},
		Spec: kfv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
			kfv1.PyTorchJobReplicaTypeMaster: spec(1), kfv1.PyTorchJobReplicaTypeWorker: spec(workers)}}}
}

func mpiJob(name string, workers int32) *mpiv2.MPIJob {
	spec := func(n int32) *mpiv2.ReplicaSpec {
		return &mpiv2.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}}
	}
	return &mpiv2.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(name)},
		Spec: mpiv2.MPIJobSpec{LauncherCreationPolicy: mpiv2.LauncherCreationPolicyWaitForWorkersReady, MPIReplicaSpecs: map[mpiv2.MPIReplicaType]*mpiv2.ReplicaSpec{
			mpiv2.MPIReplicaTypeLauncher: spec(1), mpiv2.MPIReplicaTypeWorker: spec(workers)}}}
}

func rayCluster(name string, workers int32) *rayv1.RayCluster {
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}
	return &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(name)},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{Template: tmpl},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "gpu", Replicas: ptr.To(workers), MinReplicas: ptr.To(workers), MaxReplicas: ptr.To(workers), Template: tmpl}}}}
}

// lws is a LeaderWorkerSet of replicas groups of size pods, with its
// leader StatefulSet and one group StatefulSet per leader; its pods are
// leader <name>-<g> and workers <name>-<g>-<w>, built by f.
func lws(name string, replicas, size int, f func(group, worker int, w podW) podW) (*lwsv1.LeaderWorkerSet, []*appsv1.StatefulSet, []*corev1.Pod) {
	l := &lwsv1.LeaderWorkerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(name)},
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To(int32(replicas)), StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{Size: ptr.To(int32(size)),
				WorkerTemplate: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}}}}}
	owned := func(o metav1.Object, apiVersion, kind, owner string) {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: uid(owner), Controller: ptr.To(true)}})
	}
	leaders := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid(name + "-sts")}}
	owned(leaders, lwsv1.GroupVersion.String(), "LeaderWorkerSet", name)
	stss := []*appsv1.StatefulSet{leaders}
	var pods []*corev1.Pod
	for g := 0; g < replicas; g++ {
		leader := pod(fmt.Sprintf("%s-%d", name, g)).label(lwsv1.SetNameLabelKey, name).label(lwsv1.GroupIndexLabelKey, fmt.Sprint(g)).label(lwsv1.WorkerIndexLabelKey, "0")
		leader.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: leaders.UID, Controller: ptr.To(true)}}
		pods = append(pods, f(g, 0, leader).obj())
		group := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leader.Name, UID: uid(leader.Name + "-sts")}}
		owned(group, "v1", "Pod", leader.Name)
		stss = append(stss, group)
		for w := 1; w < size; w++ {
			worker := pod(fmt.Sprintf("%s-%d-%d", name, g, w)).label(lwsv1.SetNameLabelKey, name).label(lwsv1.GroupIndexLabelKey, fmt.Sprint(g)).label(lwsv1.WorkerIndexLabelKey, fmt.Sprint(w))
			worker.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: group.Name, UID: group.UID, Controller: ptr.To(true)}}
			pods = append(pods, f(g, w, worker).obj())
		}
	}
	return l, stss, pods
}

func preemptedEvent(podName string, podUID types.UID, sec int) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podName + ".1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName, UID: podUID},
		Reason:         PreemptedReason, Message: "Preempted by pod prod/serve-0 on node node-0", LastTimestamp: mt(sec)}
}
