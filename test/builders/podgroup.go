package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// PodGroupWrapper builds a Lockstep PodGroup.
type PodGroupWrapper struct{ lockv1.PodGroup }

// MakePodGroup starts a PodGroup with the basic policy; MinCount makes it a
// gang.
func MakePodGroup() *PodGroupWrapper {
	return &PodGroupWrapper{lockv1.PodGroup{
		Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Basic: &lockv1.BasicSchedulingPolicy{}}},
	}}
}

// Obj returns the built PodGroup.
func (w *PodGroupWrapper) Obj() *lockv1.PodGroup { return &w.PodGroup }

func (w *PodGroupWrapper) Name(n string) *PodGroupWrapper      { w.PodGroup.Name = n; return w }
func (w *PodGroupWrapper) Namespace(n string) *PodGroupWrapper { w.PodGroup.Namespace = n; return w }
func (w *PodGroupWrapper) UID(u types.UID) *PodGroupWrapper    { w.PodGroup.UID = u; return w }

// MinCount makes the group a gang of minCount.
func (w *PodGroupWrapper) MinCount(n int32) *PodGroupWrapper {
	w.Spec.SchedulingPolicy = lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: n}}
	return w
}

// PriorityClass sets spec.priorityClassName.
func (w *PodGroupWrapper) PriorityClass(name string) *PodGroupWrapper {
	w.Spec.PriorityClassName = name
	return w
}

// DisruptionAll sets disruptionMode all; DisruptionSingle single.
func (w *PodGroupWrapper) DisruptionAll() *PodGroupWrapper {
	w.Spec.DisruptionMode = &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}
	return w
}

func (w *PodGroupWrapper) DisruptionSingle() *PodGroupWrapper {
	w.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	return w
}

// Topology adds a topology constraint on a node label key.
func (w *PodGroupWrapper) Topology(key string) *PodGroupWrapper {
	if w.Spec.SchedulingConstraints == nil {
		w.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
	}
	w.Spec.SchedulingConstraints.Topology = append(w.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: key})
	return w
}

// Label sets a label.
func (w *PodGroupWrapper) Label(k, v string) *PodGroupWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// ControlledBy adds a controller reference (as the job integration sets).
func (w *PodGroupWrapper) ControlledBy(apiVersion, kind, name string, uid types.UID) *PodGroupWrapper {
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	return w
}

// Condition sets a status condition.
func (w *PodGroupWrapper) Condition(typ string, status metav1.ConditionStatus, reason, msg string) *PodGroupWrapper {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg})
	return w
}

// GangPodGroup is a Lockstep PodGroup with gang minCount.
func GangPodGroup(ns, name string, minCount int32) *lockv1.PodGroup {
	g := MakePodGroup().Namespace(ns).Name(name).MinCount(minCount).Obj()
	return g
}

// Member makes the pod a Lockstep-scheduled member of a PodGroup.
func (w *PodWrapper) Member(group string) *PodWrapper {
	return w.Scheduler(lockv1.SchedulerName).Label(lockv1.PodGroupLabel, group)
}
