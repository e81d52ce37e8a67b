// Package kueuegroup makes Kueue's pod groups gangs. Kueue's pod
// integration groups pods that name one group with the label
// kueue.x-k8s.io/pod-group-name and say how many they are with the
// annotation kueue.x-k8s.io/pod-group-total-count: plain pods a user or a
// controller of theirs creates, and the pods of a StatefulSet Kueue manages
// (which Kueue labels after they are created). A Lockstep pod in such a group
// joins the Lockstep PodGroup of the same name, which Lockstep creates for
// it: Kueue decides when the group may start, Lockstep places it all or
// nothing — one group, never a second one beside Kueue's. The framework
// reads a group's gang as it reads a job's (Group is a GenericJob).
package kueuegroup

import (
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Kueue's pod group metadata (sigs.k8s.io/kueue pkg/controller/jobs/pod/constants).
const (
	// GroupNameLabel names a pod's Kueue group.
	GroupNameLabel = podgroup.KueueGroupLabel
	// TotalCountAnnotation is how many pods the group has.
	TotalCountAnnotation = "kueue.x-k8s.io/pod-group-total-count"
	// ServingAnnotation ("true") marks a serving group: a StatefulSet's or a
	// LeaderWorkerSet's, whose controller replaces its pods one by one.
	ServingAnnotation = "kueue.x-k8s.io/pod-group-serving"
	// AdmissionGate is the scheduling gate Kueue holds a pod with until it
	// admits the pod's workload.
	AdmissionGate = podgroup.KueueAdmissionGate
)

// SourceLabel marks a PodGroup that Lockstep created for a Kueue pod group;
// its value is the Kueue group's name. Lockstep keeps only such PodGroups in
// step with their pods, never one a user or an integration made.
const SourceLabel = "scheduling.lockstep.dev/kueue-pod-group"

// Named is the Kueue pod group the pod names, "" if none.
func Named(pod *corev1.Pod) string { return pod.Labels[GroupNameLabel] }

// Joins reports whether the pod is a member of its Kueue group's Lockstep
// PodGroup: a Lockstep pod whose membership is the group Kueue names.
func Joins(pod *corev1.Pod) bool {
	g := Named(pod)
	return g != "" && podgroup.Ours(pod) && podgroup.GroupOf(pod) == g
}

var (
	groupNamePath  = field.NewPath("metadata", "labels").Key(GroupNameLabel)
	totalCountPath = field.NewPath("metadata", "annotations").Key(TotalCountAnnotation)
	modePath       = field.NewPath("metadata", "annotations").Key(jobintegration.DisruptionModeAnnotation)
)

// Validate checks a pod's Kueue group metadata as Lockstep reads it: a name
// that can be a PodGroup's, a positive total count and, if set, a
// disruption mode — and none of the annotations that shape a job's gang
// but not a Kueue group's (min-count, gang-scope: its minCount is its total
// count, its gang the group), so none is silently ignored. Kueue's own
// webhook refuses the first where it admits the pod; these errors stand
// where it does not, so a pod is never placed alone because its group was
// unreadable.
func Validate(pod *corev1.Pod) field.ErrorList {
	name := Named(pod)
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(groupNamePath, name, msg+": Lockstep makes the Kueue pod group a PodGroup of this name"))
	}
	if _, err := TotalCount(pod); err != nil {
		errs = append(errs, err)
	}
	if v := pod.Annotations[jobintegration.DisruptionModeAnnotation]; !validMode(v) {
		errs = append(errs, field.Invalid(modePath, v, `not a disruption mode: use "all" (a member lost restarts the group whole; the default) or "single"`))
	}
	for _, key := range []string{jobintegration.MinCountAnnotation, jobintegration.GangScopeAnnotation} {
		if _, set := pod.Annotations[key]; set {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(key),
				fmt.Sprintf("shapes a job's gang, not Kueue pod group %q's: its gang is the group and its minCount %s; remove the annotation", name, TotalCountAnnotation)))
		}
	}
	return errs
}

// TotalCount is the pod's group's size, as its annotation says.
func TotalCount(pod *corev1.Pod) (int32, *field.Error) {
	v, ok := pod.Annotations[TotalCountAnnotation]
	if !ok {
		return 0, field.Required(totalCountPath, fmt.Sprintf("Kueue pod group %q is placed as one gang of this many pods: set it to the number of pods in the group, on each of them (Kueue needs it too)", Named(pod)))
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, field.Invalid(totalCountPath, v, "not a positive integer: set it to the number of pods in the group")
	}
	return int32(n), nil
}

// Shape is what a Kueue group's PodGroup says, read from its pods.
type Shape struct {
	// MinCount is the newest member's total count (a StatefulSet Kueue
	// scales gives its new pods the new count).
	MinCount int32
	// Mode is the newest member's disruption-mode annotation, else single
	// for a serving group (its controller replaces a lost replica by
	// itself; restarting every replica for one would take a service down),
	// else all.
	Mode *lockv1.DisruptionMode
	// Owners are the members, as owner references: the group goes with its
	// last pod, as Kueue's own Workload for the group does.
	Owners []metav1.OwnerReference
}

func validMode(v string) bool {
	_, ok := jobintegration.ParseDisruptionMode(v)
	return ok
}

// ShapeOf reads the shape of group name from the pods that name it (any
// pods: those not in the group, or whose metadata Validate refuses, are
// skipped); ok is false when no member is left. Deleted and finished
// members still own the group (and finished ones count toward its
// minCount), so only the live ones speak for its size.
func ShapeOf(name string, pods []*corev1.Pod) (s Shape, ok bool) {
	var members []*corev1.Pod
	for _, p := range pods {
		if Joins(p) && Named(p) == name && len(Validate(p)) == 0 {
			members = append(members, p)
		}
	}
	if len(members) == 0 {
		return Shape{}, false
	}
	sort.Slice(members, func(i, j int) bool {
		a, b := members[i], members[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	newest := members[len(members)-1]
	for i := len(members) - 1; i >= 0; i-- {
		if p := members[i]; p.DeletionTimestamp == nil && !podgroup.Terminal(p) {
			newest = p
			break
		}
	}
	// The same questions as of a job: members Validate passed make a gang.
	c := jobintegration.Set{}.Classify(&Group{name: name, newest: newest})
	if c.Class != jobintegration.ClassGang {
		return Shape{}, false
	}
	s.MinCount, s.Mode = c.Groups[0].MinCount, c.Mode
	for _, p := range members {
		s.Owners = append(s.Owners, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
	}
	return s, true
}

// PodGroup is the PodGroup Lockstep creates for Kueue group ns/name of
// shape s; basic (its pods placed one by one) when the group can never be
// placed whole (OrderedReady).
func PodGroup(ns, name string, s Shape, basic bool) *lockv1.PodGroup {
	policy := lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: s.MinCount}}
	if basic {
		policy = lockv1.PodGroupSchedulingPolicy{Basic: &lockv1.BasicSchedulingPolicy{}}
	}
	return &lockv1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels:          map[string]string{SourceLabel: name}, // a label value already
			OwnerReferences: s.Owners,
		},
		Spec: lockv1.PodGroupSpec{SchedulingPolicy: policy, DisruptionMode: s.Mode},
	}
}

// Ours reports whether Lockstep made pg for a Kueue group.
func Ours(pg *lockv1.PodGroup) bool {
	_, ok := pg.Labels[SourceLabel]
	return ok
}

// OrderedReady reports whether a StatefulSet creates its pods one at a time,
// each once the one before is Running and Ready (the default
// podManagementPolicy): its pods can never all wait together, so a gang of
// more than one of them would wait for ever. Kueue admits such a
// StatefulSet as one group all the same; Lockstep then places its pods one
// by one and says so.
func OrderedReady(sts *appsv1.StatefulSet) bool {
	return sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
}
