package webhook

import (
	"context"
	"errors"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	jobint "github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// JobValidator rejects Jobs targeting Lockstep whose gang annotations or
// priority class cannot work.
type JobValidator struct {
	Client client.Reader
}

var _ admission.Validator[*batchv1.Job] = (*JobValidator)(nil)

// ValidateCreate implements admission.Validator.
func (v *JobValidator) ValidateCreate(ctx context.Context, job *batchv1.Job) (admission.Warnings, error) {
	return v.validate(ctx, job)
}

// ValidateUpdate implements admission.Validator.
func (v *JobValidator) ValidateUpdate(ctx context.Context, _, job *batchv1.Job) (admission.Warnings, error) {
	return v.validate(ctx, job)
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
	errs = append(errs, validatePriority(ctx, v.Client, tmpl, job.Spec.Template.Spec.PriorityClassName, nil)...)
	var warnings admission.Warnings
	if nq := j.Qualify(); nq != nil && !j.InTreeGang() {
		warnings = append(warnings, "not a gang, its pods will be scheduled one by one: "+nq.Error())
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, job.Name, errs)
}
