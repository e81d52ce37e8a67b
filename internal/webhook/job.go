package webhook

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// JobValidator rejects Jobs targeting Lockstep whose gang annotations or
// priority class cannot work.
type JobValidator struct {
	reads
}

var _ admission.Validator[*batchv1.Job] = (*JobValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *JobValidator) ValidateCreate(ctx context.Context, job *batchv1.Job) (admission.Warnings, error) {
	return v.validate(ctx, job)
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
	var warnings admission.Warnings
	if nq := j.Qualify(); nq != nil && !j.InTreeGang() {
		warnings = append(warnings, "not a gang, its pods will be scheduled one by one: "+nq.Error())
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, job.Name, errs)
}
