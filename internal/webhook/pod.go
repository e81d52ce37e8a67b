package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// PodDefaulter defaults pods that target Lockstep:
//   - a pod carrying the membership label is scheduled by Lockstep;
//   - a pod naming its group in the upstream field spec.schedulingGroup gets
//     the membership label too: an API server that does not serve the field
//     drops it after this webhook, and the pod would schedule alone;
//   - a pod of a Job that Lockstep makes a gang joins the Job's PodGroup at
//     creation, so no rank is ever created outside its group.
//
// It reads the Job from the cache, and from the API server only when the
// cache has not seen it yet (a Job's first pods follow it within
// milliseconds).
type PodDefaulter struct {
	reads
}

var _ admission.Defaulter[*corev1.Pod] = (*PodDefaulter)(nil)

// Default implements admission.Defaulter.
func (d *PodDefaulter) Default(ctx context.Context, pod *corev1.Pod) error {
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
	owner, _ := ownerJobRef(pod)
	if owner == "" {
		return nil
	}
	ns := namespaceOf(ctx, pod.Namespace)
	logger := ctrl.LoggerFrom(ctx).WithValues("job", ns+"/"+owner)
	job, err := d.job(ctx, ns, owner)
	if err != nil {
		if apierrors.IsNotFound(err) {
			logger.Info("Pod of a Job that does not exist: not put in a group")
			return nil
		}
		return fmt.Errorf("reading the pod's Job %s/%s: %w", ns, owner, err)
	}
	if !gangJob(jobint.Integration{}.Wrap(job)) {
		logger.V(2).Info("Pod of a Job that is not a gang: not put in a group")
		return nil
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[lockv1.PodGroupLabel] = job.Name
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
