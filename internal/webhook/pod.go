package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// PodDefaulter defaults pods that target Lockstep:
//   - a pod carrying the membership label is scheduled by Lockstep;
//   - a pod naming its group in the upstream field spec.schedulingGroup gets
//     the membership label too: an API server that does not serve the field
//     drops it after this webhook, and the pod would schedule alone;
//   - a pod of a job that Lockstep makes a gang (a Job, a JobSet, …) joins
//     its role's PodGroup at creation, so no rank is ever created outside
//     its group;
//   - a pod of no such job that names a Kueue pod group
//     (kueue.x-k8s.io/pod-group-name) joins the PodGroup of that name, at
//     creation or, unbound, when Kueue labels it later (package kueuegroup).
//
// It reads the job from the cache, and from the API server only when the
// cache has not seen it yet (a job's first pods follow it within
// milliseconds).
type PodDefaulter struct {
	reads
}

var _ admission.Defaulter[*corev1.Pod] = (*PodDefaulter)(nil)

// Default implements admission.Defaulter.
func (d *PodDefaulter) Default(ctx context.Context, pod *corev1.Pod) error {
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Update {
		return d.joinKueueGroupOnUpdate(ctx, pod)
	}
	if pod.Labels[lockv1.PodGroupLabel] != "" && (pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName) {
		pod.Spec.SchedulerName = lockv1.SchedulerName
	}
	if pod.Spec.SchedulerName != lockv1.SchedulerName || pod.Labels[lockv1.PodGroupLabel] != "" {
		return nil
	}
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[lockv1.PodGroupLabel] = *sg.PodGroupName
		return nil
	}
	ns := namespaceOf(ctx, pod.Namespace)
	owner, j, err := d.ownerJob(ctx, ns, pod)
	if err != nil {
		return fmt.Errorf("reading the pod's owner: %w", err)
	}
	if owner == nil {
		joinKueueGroup(pod)
		return nil
	}
	logger := ctrl.LoggerFrom(ctx).WithValues("owner", owner.Integration.GVK().Kind+" "+ns+"/"+owner.Name)
	if j == nil {
		logger.Info("Pod of a job that does not exist: not put in a group")
		return nil
	}
	c := integrationSet.Classify(j)
	if c.Class != jobintegration.ClassGang {
		logger.V(2).Info("Pod of a job that is not a gang: not put in a group", "class", c.Class)
		return nil
	}
	g := jobintegration.GroupOf(j, c.Groups, pod)
	if g == "" {
		if r, ok := roleNamed(j, j.RoleOf(pod)); ok && r.Solo {
			logger.V(2).Info("Pod of a role scheduled alone: not put in a group", "role", r.Name)
		} else {
			logger.Info("Pod of a gang job in none of its roles: not put in a group", "role", j.RoleOf(pod))
		}
		return nil
	}
	joinGang(&pod.ObjectMeta, g, jobintegration.GangOf(j))
	return nil
}

// joinKueueGroup puts a pod that names a Kueue pod group in the Lockstep
// PodGroup of that name (created for it by the controllers), unless it is
// a pod of a job an integration groups (that job's group rules). Metadata
// Lockstep cannot read is left for the validation to refuse.
func joinKueueGroup(pod *corev1.Pod) {
	g := kueuegroup.Named(pod)
	if g == "" || len(kueuegroup.Validate(pod)) > 0 {
		return
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[lockv1.PodGroupLabel] = g
}

// joinKueueGroupOnUpdate: Kueue labels a StatefulSet's pods with their
// group once they exist (gated until it admits them); one that is not in a
// group yet and is not bound joins it then, as it would have at creation.
func (d *PodDefaulter) joinKueueGroupOnUpdate(ctx context.Context, pod *corev1.Pod) error {
	if !podgroup.Ours(pod) || podgroup.GroupOf(pod) != "" || pod.Spec.NodeName != "" || kueuegroup.Named(pod) == "" {
		return nil
	}
	owner, _, err := d.ownerJob(ctx, namespaceOf(ctx, pod.Namespace), pod)
	if err != nil {
		return fmt.Errorf("reading the pod's owner: %w", err)
	}
	if owner == nil {
		joinKueueGroup(pod)
	}
	return nil
}

// podMutator adds to the pod defaulter's answer a warning when a pod names
// its group in spec.schedulingGroup and the API server does not serve the
// field: the field is dropped, and the membership label the defaulter set
// is what keeps the pod in its group.
type podMutator struct {
	inner admission.Handler
	// dropsSchedulingGroup: the API server does not serve scheduling.k8s.io
	// PodGroups (GenericWorkload off), so it drops spec.schedulingGroup.
	dropsSchedulingGroup bool
}

// Handle implements admission.Handler.
func (m podMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := m.inner.Handle(ctx, req)
	if !m.dropsSchedulingGroup || !resp.Allowed || req.Operation != admissionv1.Create {
		return resp
	}
	var p struct {
		Spec struct {
			SchedulingGroup *struct {
				PodGroupName *string `json:"podGroupName"`
			} `json:"schedulingGroup"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &p); err != nil || p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return resp
	}
	resp.Warnings = append(resp.Warnings, fmt.Sprintf("spec.schedulingGroup is not served by this API server (GenericWorkload is off) and is dropped: "+
		"Lockstep keeps the pod in PodGroup %q through the label %s=%s instead; use the label in your manifests", *p.Spec.SchedulingGroup.PodGroupName, lockv1.PodGroupLabel, *p.Spec.SchedulingGroup.PodGroupName))
	return resp
}

// roleNamed is the job's role of that name.
func roleNamed(j jobintegration.GenericJob, name string) (jobintegration.Role, bool) {
	for _, r := range j.Roles() {
		if r.Name == name {
			return r, true
		}
	}
	return jobintegration.Role{}, false
}
