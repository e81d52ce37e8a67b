package webhook

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// PodDefaulter defaults pods that target Lockstep:
//   - a pod carrying the membership label is scheduled by Lockstep;
//   - a pod of a Job that Lockstep makes a gang joins the Job's PodGroup at
//     creation, so no rank is ever created outside its group.
type PodDefaulter struct {
	// Reader reads Jobs uncached: a Job's first pods are created right after it.
	Reader client.Reader
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
	owner := ownerJob(pod)
	if owner == "" {
		return nil
	}
	job := &batchv1.Job{}
	ns := namespaceOf(ctx, pod.Namespace)
	logger := ctrl.LoggerFrom(ctx).WithValues("job", ns+"/"+owner)
	if err := d.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: owner}, job); err != nil {
		if apierrors.IsNotFound(err) {
			logger.Info("Pod of a Job that does not exist: not put in a group")
			return nil
		}
		return fmt.Errorf("reading the pod's Job %s/%s: %w", ns, owner, err)
	}
	j := jobint.Integration{}.Wrap(job)
	if !gangJob(j) {
		logger.V(2).Info("Pod of a Job that is not a gang: not put in a group")
		return nil
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[lockv1.PodGroupLabel] = job.Name
	return nil
}

// gangJob reports whether the job integration makes j a Lockstep gang.
func gangJob(j jobintegration.GenericJob) bool {
	if !jobintegration.TargetsLockstep(j) || j.InTreeGang() || j.Qualify() != nil {
		return false
	}
	_, err := jobintegration.MinCount(j)
	return err == nil
}

func ownerJob(pod *corev1.Pod) string {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.APIVersion == batchv1.SchemeGroupVersion.String() && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
}
