package webhook

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// JobValidator rejects Jobs targeting Lockstep whose gang annotations or
// priority class cannot work.
type JobValidator struct {
	reads
	// Claims warns, once per Job, about the template's claims (its pods'
	// admission is skipped when the Job controller creates them).
	Claims *claimChecks
}

var _ admission.Validator[*batchv1.Job] = (*JobValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *JobValidator) ValidateCreate(ctx context.Context, job *batchv1.Job) (admission.Warnings, error) {
	warnings, err := v.validate(ctx, job)
	if v.Claims != nil && jobintegration.TargetsLockstep(jobint.Integration{}.Wrap(job)) {
		ns := namespaceOf(ctx, job.Namespace)
		for _, pc := range job.Spec.Template.Spec.ResourceClaims {
			warnings = append(warnings, v.Claims.claimWarnings(ctx, ns, pc.Name, claimSource{pc.ResourceClaimName, pc.ResourceClaimTemplateName})...)
		}
	}
	return warnings, err
}

// ValidateUpdate implements admission.Validator: the new Job must be valid,
// and its disruption mode cannot change — the gang's PodGroup fixes it at
// creation (a minCount change is applied to the live gang).
func (v *JobValidator) ValidateUpdate(ctx context.Context, old, job *batchv1.Job) (admission.Warnings, error) {
	warnings, err := v.validate(ctx, job)
	if err != nil {
		return warnings, err
	}
	key := jobintegration.DisruptionModeAnnotation
	was, is := modeOf(old.Annotations[key]), modeOf(job.Annotations[key])
	if was != is && gangJob(jobint.Integration{}.Wrap(old)) {
		return warnings, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, job.Name, field.ErrorList{
			field.Forbidden(field.NewPath("metadata", "annotations").Key(key),
				fmt.Sprintf("the gang's disruption mode is fixed when its PodGroup is created (it is %q): restore the annotation, or delete and recreate the Job to change it", was)),
		})
	}
	return warnings, nil
}

// modeOf normalizes the disruption-mode annotation ("" is all).
func modeOf(v string) string {
	if v == "" {
		return "all"
	}
	return v
}

// ValidateDelete implements admission.Validator.
func (v *JobValidator) ValidateDelete(context.Context, *batchv1.Job) (admission.Warnings, error) {
	return nil, nil
}

func (v *JobValidator) validate(ctx context.Context, job *batchv1.Job) (admission.Warnings, error) {
	j := jobint.Integration{}.Wrap(job)
	if !jobintegration.TargetsLockstep(j) {
		return nil, nil
	}
	meta := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	var nq *jobintegration.NotQualified
	if _, err := jobintegration.MinCount(j); errors.As(err, &nq) {
		errs = append(errs, field.Invalid(meta.Key(jobintegration.MinCountAnnotation), job.Annotations[jobintegration.MinCountAnnotation], nq.Error()))
	}
	if _, err := jobintegration.DisruptionMode(j); errors.As(err, &nq) {
		errs = append(errs, field.Invalid(meta.Key(jobintegration.DisruptionModeAnnotation), job.Annotations[jobintegration.DisruptionModeAnnotation], nq.Error()))
	}
	tmpl := field.NewPath("spec", "template", "spec")
	errs = append(errs, validatePriority(ctx, v.Cached, tmpl, job.Spec.Template.Spec.PriorityClassName, nil)...)
	if g := job.Spec.Template.Labels[lockv1.PodGroupLabel]; g != "" && g != job.Name {
		// The Job's pods will join g: it must not be another Job's gang.
		if pg, err := v.podGroup(ctx, namespaceOf(ctx, job.Namespace), g); err == nil {
			if ref := metav1.GetControllerOf(pg); ref != nil && ref.Kind == "Job" && ref.Name != job.Name {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "template", "metadata", "labels").Key(lockv1.PodGroupLabel),
					fmt.Sprintf("PodGroup %s is the gang of Job %s: only that Job's pods join it", g, ref.Name)))
			}
		}
	}
	var warnings admission.Warnings
	if nq := j.Qualify(); nq != nil && !j.InTreeGang() {
		warnings = append(warnings, "not a gang, its pods will be scheduled one by one: "+nq.Error())
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, job.Name, errs)
}

// JobDefaulter writes a gang Job's group into its pod template at creation,
// so the Job controller creates every rank already in its group and no
// per-pod webhook call is needed for it. It is an optimization: with it off
// (or for a Job with generateName, whose name admission does not know yet),
// the pod webhook labels each rank instead.
type JobDefaulter struct{}

var _ admission.Defaulter[*batchv1.Job] = JobDefaulter{}

// Default implements admission.Defaulter.
func (JobDefaulter) Default(_ context.Context, job *batchv1.Job) error {
	if job.Name == "" || !gangJob(jobint.Integration{}.Wrap(job)) {
		return nil
	}
	if job.Spec.Template.Labels == nil {
		job.Spec.Template.Labels = map[string]string{}
	}
	job.Spec.Template.Labels[lockv1.PodGroupLabel] = job.Name
	return nil
}
