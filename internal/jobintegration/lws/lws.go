// Package lws is the LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)
// integration: each replica — a leader and its size-1 workers — is one
// gang (<lws>-<group index>) of size pods, independent of the others. The
// pods of a group are told apart by the group index the LeaderWorkerSet
// controller gives them, so their group is set per pod at admission (one
// template serves every group).
package lws

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Integration is the LeaderWorkerSet integration.
type Integration struct{}

var (
	_ jobintegration.Integration         = Integration{}
	_ jobintegration.PodAdmissionMatcher = Integration{}
)

var gvk = lwsv1.GroupVersion.WithKind("LeaderWorkerSet")

var (
	stsKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Name implements Integration.
func (Integration) Name() string { return "leaderworkerset" }

// GVK implements Integration.
func (Integration) GVK() schema.GroupVersionKind { return gvk }

// Resource implements Integration.
func (Integration) Resource() string { return "leaderworkersets" }

// Aliases implements Integration.
func (Integration) Aliases() []string { return []string{"lws", "leaderworkerset", "leaderworkersets"} }

// NewObject implements Integration.
func (Integration) NewObject() client.Object { return &lwsv1.LeaderWorkerSet{} }

// Wrap implements Integration.
func (Integration) Wrap(o client.Object) jobintegration.GenericJob {
	return &LWS{o.(*lwsv1.LeaderWorkerSet)}
}

// AddToScheme implements Integration.
func (Integration) AddToScheme(s *runtime.Scheme) error { return lwsv1.AddToScheme(s) }

// AdmissionMatch implements Integration.
func (Integration) AdmissionMatch() string {
	return `object.spec.leaderWorkerTemplate.workerTemplate.spec.schedulerName == "` + lockv1.SchedulerName + `"`
}

// PodAdmissionMatch implements PodAdmissionMatcher: the pods the pod
// webhook must label (their group is per pod), the LeaderWorkerSet
// controller's.
func (Integration) PodAdmissionMatch() string {
	return `(has(object.metadata.labels) && "` + lwsv1.SetNameLabelKey + `" in object.metadata.labels)`
}

// OwnerOf implements Integration. A leader pod is controlled by the
// LeaderWorkerSet's StatefulSet; a worker by its group's StatefulSet,
// which its leader pod controls.
func (Integration) OwnerOf(ctx context.Context, get jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if pod.Labels[lwsv1.SetNameLabelKey] == "" {
		return "", "", nil
	}
	// pod → StatefulSet → LeaderWorkerSet (a leader), or pod → group
	// StatefulSet → leader pod → StatefulSet → LeaderWorkerSet (a worker).
	var obj client.Object = pod
	for hop := 0; hop < 4; hop++ {
		if ref, ok := jobintegration.ControllerOf(obj, gvk); ok {
			return ref.Name, ref.UID, nil
		}
		var next client.Object
		ref, ok := jobintegration.ControllerOf(obj, stsKind)
		if ok {
			next = &appsv1.StatefulSet{}
		} else if ref, ok = jobintegration.ControllerOf(obj, podKind); ok {
			next = &corev1.Pod{}
		} else {
			return "", "", nil
		}
		if err := get.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, next); err != nil {
			if apierrors.IsNotFound(err) {
				return "", "", nil
			}
			return "", "", err
		}
		if next.GetUID() != ref.UID {
			return "", "", nil
		}
		obj = next
	}
	return "", "", nil
}

// LWS adapts a LeaderWorkerSet.
type LWS struct{ *lwsv1.LeaderWorkerSet }

var (
	_ jobintegration.GenericJob = (*LWS)(nil)
	_ jobintegration.PodGrouper = (*LWS)(nil)
)

// Object implements GenericJob.
func (l *LWS) Object() client.Object { return l.LeaderWorkerSet }

// GVK implements GenericJob.
func (l *LWS) GVK() schema.GroupVersionKind { return gvk }

func (l *LWS) replicas() int32 {
	if l.Spec.Replicas == nil {
		return 1
	}
	return *l.Spec.Replicas
}

func (l *LWS) size() int32 {
	if l.Spec.LeaderWorkerTemplate.Size == nil {
		return 1
	}
	return *l.Spec.LeaderWorkerTemplate.Size
}

// Roles implements GenericJob: the leaders and the workers of every group.
func (l *LWS) Roles() []jobintegration.Role {
	lwt := &l.Spec.LeaderWorkerTemplate
	path := field.NewPath("spec", "leaderWorkerTemplate")
	leader, leaderPath := &lwt.WorkerTemplate, path.Child("workerTemplate")
	if lwt.LeaderTemplate != nil {
		leader, leaderPath = lwt.LeaderTemplate, path.Child("leaderTemplate")
	}
	return []jobintegration.Role{
		{Name: "leader", Template: leader, Count: l.replicas(), Path: leaderPath},
		{Name: "worker", Template: &lwt.WorkerTemplate, Count: l.replicas() * (l.size() - 1), Path: path.Child("workerTemplate")},
	}
}

// RoleOf implements GenericJob.
func (l *LWS) RoleOf(pod *corev1.Pod) string {
	if pod.Labels[lwsv1.WorkerIndexLabelKey] == "0" {
		return "leader"
	}
	return "worker"
}

// Groups implements PodGrouper: one gang per replica.
func (l *LWS) Groups() []jobintegration.Group {
	out := make([]jobintegration.Group, 0, l.replicas())
	for i := int32(0); i < l.replicas(); i++ {
		out = append(out, jobintegration.Group{Name: l.Name + "-" + strconv.Itoa(int(i)), Template: "group", MinCount: l.size(), Size: l.size(), Roles: []string{"leader", "worker"}})
	}
	return out
}

// GroupOfPod implements PodGrouper: the gang of one of its pods: by its group index — the
// label the LeaderWorkerSet controller sets (on workers from their
// StatefulSet's template), or for a leader not labelled yet (its webhook
// may run after Lockstep's) the leader StatefulSet's ordinal in its name,
// which is where the LeaderWorkerSet's webhook takes the index from.
func (l *LWS) GroupOfPod(pod *corev1.Pod) string {
	if idx, ok := pod.Labels[lwsv1.GroupIndexLabelKey]; ok {
		return l.Name + "-" + idx
	}
	ref, ok := jobintegration.ControllerOf(pod, stsKind)
	if !ok || ref.Name != l.Name || !strings.HasPrefix(pod.Name, l.Name+"-") {
		return ""
	}
	idx := strings.TrimPrefix(pod.Name, l.Name+"-")
	if n, err := strconv.Atoi(idx); err != nil || n < 0 || strconv.Itoa(n) != idx {
		return ""
	}
	return l.Name + "-" + idx
}

// Qualify implements GenericJob: leader and workers target the same
// scheduler, and the workers are created with their leader (startupPolicy
// LeaderReady creates them only once the leader runs: such a group could
// never be placed whole).
func (l *LWS) Qualify() *jobintegration.NotQualified {
	roles := l.Roles()
	if a, b := roles[0].Template.Spec.SchedulerName, roles[1].Template.Spec.SchedulerName; a != b {
		return &jobintegration.NotQualified{Condition: fmt.Sprintf("the leader's pods name scheduler %q, the workers' %q", a, b), Fix: "set schedulerName: " + lockv1.SchedulerName + " on both templates"}
	}
	if l.Spec.StartupPolicy == lwsv1.LeaderReadyStartupPolicy {
		return &jobintegration.NotQualified{Condition: "startupPolicy LeaderReady creates the workers only once the leader runs, so a group could never be placed whole", Fix: "use startupPolicy: LeaderCreated (the default)"}
	}
	for _, r := range roles {
		if jobintegration.HasGroup(r.Template, "") {
			return jobintegration.GroupNamed("the "+r.Name+" template", r.Template)
		}
	}
	return nil
}

// Stopped implements GenericJob: a LeaderWorkerSet serves until deleted.
func (l *LWS) Stopped() (string, bool, bool) { return "", false, false }
