package kueuegroup

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Group is a Kueue pod group behind the interface of the kinds of jobs, as
// Kueue's own pod integration treats its group of pods as its job: the
// framework classifies it and reads its gang (jobintegration.Classify,
// Groups, DisruptionMode) as it does a Job's. Its object is its newest
// live member, whose metadata says the group's shape (Kueue's total count,
// a serving group, the disruption mode); its one role is its members.
//
// It is a GenericJob only: no Integration, for there is no kind of its own
// to watch, admit or explain (its pods are the objects, and the webhook and
// the Kueue group reconciler handle them), and no Stopped state beyond its
// pods' own.
type Group struct {
	name   string
	newest *corev1.Pod
}

var (
	_ jobintegration.GenericJob          = (*Group)(nil)
	_ jobintegration.MinCounter          = (*Group)(nil)
	_ jobintegration.PodGrouper          = (*Group)(nil)
	_ jobintegration.DisruptionDefaulter = (*Group)(nil)
)

// roleMember is a group's one role.
const roleMember = "member"

// Object implements GenericJob: the newest live member.
func (g *Group) Object() client.Object { return g.newest }

// GVK implements GenericJob.
func (g *Group) GVK() schema.GroupVersionKind { return corev1.SchemeGroupVersion.WithKind("Pod") }

// Roles implements GenericJob: the members, as many as the total count
// says, like the newest.
func (g *Group) Roles() []jobintegration.Role {
	n, _ := TotalCount(g.newest)
	t := &corev1.PodTemplateSpec{ObjectMeta: g.newest.ObjectMeta, Spec: g.newest.Spec}
	return []jobintegration.Role{{Name: roleMember, Template: t, Count: n, Path: field.NewPath("metadata")}}
}

// RoleOf implements GenericJob.
func (g *Group) RoleOf(*corev1.Pod) string { return roleMember }

// Qualify implements GenericJob: Kueue group metadata Lockstep can read
// (Validate; the webhook refuses the rest at admission).
func (g *Group) Qualify() *jobintegration.NotQualified {
	if errs := Validate(g.newest); len(errs) > 0 {
		return &jobintegration.NotQualified{Condition: errs.ToAggregate().Error(), Fix: "correct the Kueue pod group metadata on the pods"}
	}
	return nil
}

// Stopped implements GenericJob: a group of pods stops only as its pods
// end, which the integrity controller sees from the pods themselves.
func (g *Group) Stopped() (string, bool, bool) { return "", false, false }

// KindMinCount implements MinCounter: Kueue's total count.
func (g *Group) KindMinCount() (int32, bool) {
	n, err := TotalCount(g.newest)
	return n, err == nil
}

// Groups implements PodGrouper: one gang, named as Kueue names the group.
func (g *Group) Groups() []jobintegration.Group {
	n, _ := TotalCount(g.newest)
	return []jobintegration.Group{{Name: g.name, Template: roleMember, MinCount: n, Size: n, Roles: []string{roleMember}}}
}

// GroupOfPod implements PodGrouper: the group, for a pod that joined it.
func (g *Group) GroupOfPod(p *corev1.Pod) string {
	if Joins(p) && Named(p) == g.name {
		return g.name
	}
	return ""
}

// DefaultDisruptionMode implements DisruptionDefaulter: a serving group's
// controller replaces a lost replica by itself, so restarting every
// replica for one would take a service down: single; else all.
func (g *Group) DefaultDisruptionMode() string {
	if g.newest.Annotations[ServingAnnotation] == "true" {
		return "single"
	}
	return "all"
}
