package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// PodDefaulter defaults pods that target Lockstep:
//   - a pod carrying the membership label is scheduled by Lockstep;
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
