package podgroup

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// IndexByGroup is an informer index function (cache.IndexFunc) of pods by
// the group they are members of, "<namespace>/<group>"; pods of no group
// are not indexed.
func IndexByGroup(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if g := GroupOf(pod); g != "" {
		return []string{pod.Namespace + "/" + g}, nil
	}
	return nil, nil
}

// GroupOf returns the PodGroup a pod belongs to: the Lockstep label, else
// spec.schedulingGroup.podGroupName where the API server serves it.
func GroupOf(pod *corev1.Pod) string {
	if g := pod.Labels[lockv1.PodGroupLabel]; g != "" {
		return g
	}
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	return ""
}

// Ours reports whether Lockstep schedules the pod.
func Ours(pod *corev1.Pod) bool { return pod.Spec.SchedulerName == lockv1.SchedulerName }

// Pending reports whether a pod waits for a node.
func Pending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && !Terminal(pod)
}

// Gated reports whether a pod still has scheduling gates
// (spec.schedulingGates): it is not a candidate for a node until the last is
// removed.
func Gated(pod *corev1.Pod) bool { return len(pod.Spec.SchedulingGates) > 0 }

// Active reports whether a bound pod still holds its node (it may be
// terminating: it holds the node until it is terminal).
func Active(pod *corev1.Pod) bool { return pod.Spec.NodeName != "" && !Terminal(pod) }

// Terminal reports whether the pod's phase is Succeeded or Failed.
func Terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// Succeeded reports whether the pod finished with phase Succeeded.
func Succeeded(pod *corev1.Pod) bool { return pod.Status.Phase == corev1.PodSucceeded }

// Going reports whether the pod is on its way out: being deleted, or marked
// for disruption (a gang restart or a preemption marks, then deletes).
func Going(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || HasDisruption(pod, "")
}

// Holds reports whether a member counts toward its group's minCount without
// being placed again, given the group's current incarnation: it finished
// successfully (in any incarnation: a rank that is done is never missing),
// or it is bound and stays — not terminal, not going, and not a member of an
// incarnation that has ended (a restart or preemption is taking it down,
// even if it is not marked yet).
func Holds(pod *corev1.Pod, inc *lockv1.PodGroupIncarnation) bool {
	if Succeeded(pod) {
		return true
	}
	return Active(pod) && !Going(pod) && !(inc != nil && inc.Ended != nil && inc.Lists(pod.UID))
}

// MemberIndex is the pod's completion index in its Job, if it has one.
func MemberIndex(pod *corev1.Pod) *int32 {
	v, ok := pod.Labels[lockv1.JobCompletionIndexLabel]
	if !ok {
		if v, ok = pod.Annotations[lockv1.JobCompletionIndexLabel]; !ok {
			return nil
		}
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return nil
	}
	i := int32(n)
	return &i
}

// Admits reports whether a pod that names the group is one of its members:
//   - a rank of a job Lockstep makes gangs of (GangOfAnnotation) joins only
//     the group that job controls: a group of that name it does not
//     control (created before it by hand, another kind's of the same name)
//     is not its gang;
//   - a group controlled by a Job takes only that Job's pods.
//
// The webhook refuses the pods it sees at admission; this keeps the
// scheduler and the integrity controller from counting one that got in
// anyway (the Job controller's pods skip the pod webhook, or one created
// before the group existed).
func Admits(pg *lockv1.PodGroup, pod *corev1.Pod) bool { return admitter(pg)(pod) }

// admitter is Admits for one group, its controller read once.
func admitter(pg *lockv1.PodGroup) func(*corev1.Pod) bool {
	if pg == nil || Upstream(pg) {
		return func(*corev1.Pod) bool { return true }
	}
	ref := metav1.GetControllerOf(pg)
	job := ref != nil && ref.Kind == "Job" && ref.APIVersion == "batch/v1"
	return func(pod *corev1.Pod) bool {
		if of, ok := pod.Annotations[lockv1.GangOfAnnotation]; ok && (ref == nil || GangOf(ref) != of) {
			return false
		}
		if !job {
			return true
		}
		owner := metav1.GetControllerOfNoCopy(pod)
		return owner != nil && owner.UID == ref.UID
	}
}

// GangOf is the GangOfAnnotation value naming the job ref refers to, ""
// for a reference whose apiVersion does not parse.
func GangOf(ref *metav1.OwnerReference) string {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ""
	}
	return GangOfJob(gv.WithKind(ref.Kind).GroupKind(), ref.Name)
}

// GangOfJob is the GangOfAnnotation value naming job name of kind gk:
// "<Kind>.<group>/<name>" ("<Kind>/<name>" in the core group).
func GangOfJob(gk schema.GroupKind, name string) string {
	if gk.Group == "" {
		return gk.Kind + "/" + name
	}
	return gk.Kind + "." + gk.Group + "/" + name
}

// StopExitCodes are the exit codes of a process stopped the way Kubernetes
// stops a container: SIGTERM (143), then SIGKILL past its grace period
// (137). A member whose containers ended only so was stopped, not failed.
var StopExitCodes = []int32{143, 137}
