package jobintegration

import (
	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Class is what Lockstep makes of a job.
type Class int

const (
	// ClassNotLockstep: its pods are not scheduled by Lockstep; it is left
	// alone.
	ClassNotLockstep Class = iota
	// ClassChild: another integration's job controls it (a JobSet's Job, an
	// MPI launcher, a RayJob's RayCluster); it is part of that one's gang
	// and has none of its own.
	ClassChild
	// ClassInTree: it carries its own gang policy for the API server's
	// scheduling.k8s.io PodGroup (InTreeGanger); its controller creates that
	// group, Lockstep schedules it and creates none.
	ClassInTree
	// ClassNamed: its pod template names a group of its own choosing; its
	// pods join that group, and Lockstep creates none.
	ClassNamed
	// ClassNotQualified: it has not the shape of a gang; its pods are
	// scheduled one by one.
	ClassNotQualified
	// ClassGang: Lockstep makes it gangs.
	ClassGang
)

var classNames = [...]string{"not Lockstep's", "child", "in-tree gang", "names its group", "not qualified", "gang"}

func (c Class) String() string { return classNames[c] }

// Classification is a job's Class and what goes with it.
type Classification struct {
	Class Class
	// Parent is the integration whose job controls it (ClassChild).
	Parent Integration
	// Why is the failed condition and its fix (ClassNotQualified), or the
	// group the template names (ClassNamed: Why.Named).
	Why *NotQualified
	// Groups are the gangs (ClassGang), and Mode their disruption mode.
	Groups []Group
	Mode   *lockv1.DisruptionMode
}

// Classify answers what Lockstep makes of j, for the job reconciler and
// the webhook's job and pod defaulting alike: in this order, whether its
// pods target Lockstep, whether another integration's job controls it,
// whether it carries an in-tree gang policy, whether its template names a
// group, whether it qualifies (shape, annotations); a job that passes
// every step is a gang.
func (s Set) Classify(j GenericJob) Classification {
	if !TargetsLockstep(j) {
		return Classification{Class: ClassNotLockstep}
	}
	if p := s.Parent(j.Object()); p != nil {
		return Classification{Class: ClassChild, Parent: p}
	}
	if InTreeGang(j) {
		return Classification{Class: ClassInTree}
	}
	groups, nq := groupsOf(j)
	if nq != nil && nq.Named != "" {
		return Classification{Class: ClassNamed, Why: nq}
	}
	if nq != nil {
		return Classification{Class: ClassNotQualified, Why: nq}
	}
	mode, nq := disruptionMode(j)
	if nq != nil {
		return Classification{Class: ClassNotQualified, Why: nq}
	}
	return Classification{Class: ClassGang, Groups: groups, Mode: mode}
}

// Gang reports whether Lockstep makes j gangs (ClassGang).
func (s Set) Gang(j GenericJob) bool { return s.Classify(j).Class == ClassGang }

// GangOf is the lockv1.GangOfAnnotation value of j's pods (when j is a
// gang): they join only a group j controls (podgroup.Admits).
func GangOf(j GenericJob) string {
	return podgroup.GangOfJob(j.GVK().GroupKind(), j.Object().GetName())
}
