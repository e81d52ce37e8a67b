package job

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	batchdefaults "k8s.io/kubernetes/pkg/apis/batch/v1"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/utils/ptr"
)

// rankJob is a 4-rank Indexed Job as a user writes it.
func rankJob(restart corev1.RestartPolicy, edit func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](4), Completions: ptr.To[int32](4), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			// The selector the API server generates at creation.
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}, ManualSelector: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}},
				Spec: corev1.PodSpec{
					SchedulerName: "lockstep", RestartPolicy: restart,
					Containers: []corev1.Container{{Name: "rank", Image: "trainer:1"}},
				},
			},
		},
	}
	if edit != nil {
		edit(j)
	}
	return j
}

func rules(r ...batchv1.PodFailurePolicyRule) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: r} }
}

func exitCodes(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: codes}}
}

func onDisruption(action batchv1.PodFailurePolicyAction) batchv1.PodFailurePolicyRule {
	r := IgnoreDisruptions()
	r.Action = action
	return r
}

// A Job Lockstep restarts whole gets, at admission, exactly the rule that
// ignores disruptions — and only when it has no policy of its own and may
// have one; what it cannot be given, or asked to be kept without, is warned
// naming the fix. The Job is first defaulted as the API server does before
// admission sees it, and the result must pass the API server's own Job
// validation.
func TestRestartBudget(t *testing.T) {
	ignoreFirst := rules(IgnoreDisruptions(), exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0))
	for name, tc := range map[string]struct {
		job     *batchv1.Job
		wantSet []string
		// wantPolicy is the policy after admission (nil: as written).
		wantPolicy *batchv1.PodFailurePolicy
		warn       string // a substring of the one warning, "" for none
	}{
		"Never, no policy: the rule, the replacement policy the API server requires with it, a per-index backoff": {
			job:        rankJob(corev1.RestartPolicyNever, nil),
			wantSet:    []string{"podFailurePolicy", "podReplacementPolicy", "backoffLimitPerIndex"},
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}},
		},
		"Never, podReplacementPolicy Failed written": {
			job:        rankJob(corev1.RestartPolicyNever, func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed) }),
			wantSet:    []string{"podFailurePolicy", "backoffLimitPerIndex"},
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}},
		},
		"Never, NonIndexed: no per-index backoff": {
			job: rankJob(corev1.RestartPolicyNever, func(j *batchv1.Job) {
				j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
			}),
			wantSet:    []string{"podFailurePolicy", "podReplacementPolicy"},
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}},
		},
		"Never, maxFailedIndexes chosen: the per-index limits are the user's": {
			job: rankJob(corev1.RestartPolicyNever, func(j *batchv1.Job) {
				j.Spec.BackoffLimitPerIndex, j.Spec.MaxFailedIndexes = ptr.To[int32](2), ptr.To[int32](1)
			}),
			wantSet:    []string{"podFailurePolicy", "podReplacementPolicy"},
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}},
		},
		"Never, a per-index Job: its limits untouched": {
			job: rankJob(corev1.RestartPolicyNever, func(j *batchv1.Job) {
				j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
			}),
			wantSet:    []string{"podFailurePolicy", "podReplacementPolicy"},
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}},
		},
		"OnFailure allows no policy: warned": {
			job:  rankJob(corev1.RestartPolicyOnFailure, nil),
			warn: "restartPolicy OnFailure, which allows no podFailurePolicy: each member a gang restart or preemption deletes counts as a failed pod against its backoffLimit (6); set restartPolicy: Never",
		},
		"its own policy ignores disruptions first": {
			job:        rankJob(corev1.RestartPolicyNever, ignoreFirst),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions(), exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0)}},
		},
		"upstream's example: FailJob on exit code 42, then Ignore disruptions": {
			job:        rankJob(corev1.RestartPolicyNever, rules(exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42), IgnoreDisruptions())),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42), IgnoreDisruptions()}},
		},
		"its own policy fails the Job on any non-zero exit before ignoring disruptions": {
			job:        rankJob(corev1.RestartPolicyNever, rules(exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0), IgnoreDisruptions())),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0), IgnoreDisruptions()}},
			warn:       "rule 0 (FailJob on exit codes NotIn [0]) matches a rank stopped by a gang restart (exit code 143 or 137) before any rule ignores it",
		},
		"its own policy counts SIGTERM's exit code": {
			job:        rankJob(corev1.RestartPolicyNever, rules(exitCodes(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpIn, 143))),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{exitCodes(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpIn, 143)}},
			warn:       "rule 0 (Count on exit codes In [143])",
		},
		"its own policy fails the Job on a disruption": {
			job:        rankJob(corev1.RestartPolicyNever, rules(onDisruption(batchv1.PodFailurePolicyActionFailJob))),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onDisruption(batchv1.PodFailurePolicyActionFailJob)}},
			warn:       "rule 0 (FailJob on DisruptionTarget) counts a rank stopped by a gang restart",
		},
		"its own policy has no disruption rule": {
			job:        rankJob(corev1.RestartPolicyNever, rules(exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42))),
			wantPolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{exitCodes(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, 42)}},
			warn:       "has no rule that ignores DisruptionTarget",
		},
		"kept as written": {
			job: rankJob(corev1.RestartPolicyNever, func(j *batchv1.Job) {
				j.Annotations = map[string]string{RestartBudgetAnnotation: RestartBudgetAsWritten}
				j.Spec.BackoffLimit = ptr.To[int32](2)
			}),
			warn: "kept as written (scheduling.lockstep.dev/restart-budget: as-written): each member a gang restart or preemption deletes counts as a failed pod against its backoffLimit (2)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := tc.job
			batchdefaults.SetObjectDefaults_Job(j) // the API server, before admission
			written := j.DeepCopy()
			set := (&Job{j}).DefaultRestartBudget()
			if d := cmp.Diff(tc.wantSet, set); d != "" {
				t.Errorf("fields set (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantPolicy, j.Spec.PodFailurePolicy); d != "" {
				t.Errorf("podFailurePolicy (-want,+got):\n%s", d)
			}
			if got := j.Annotations[RestartBudgetDefaultedAnnotation]; got != strings.Join(tc.wantSet, ",") {
				t.Errorf("annotation %s = %q, want %q", RestartBudgetDefaultedAnnotation, got, strings.Join(tc.wantSet, ","))
			}
			// Nothing else of the Job changes: every failure that is not a
			// disruption counts as the user wrote.
			back := j.DeepCopy()
			back.Spec.PodFailurePolicy, back.Spec.PodReplacementPolicy = written.Spec.PodFailurePolicy, written.Spec.PodReplacementPolicy
			if slices.Contains(set, PerIndexBackoff) {
				// The per-index limit is the Job-wide one, which stays.
				if got, want := ptr.Deref(j.Spec.BackoffLimitPerIndex, -1), *written.Spec.BackoffLimit; got != want || *j.Spec.BackoffLimit != want {
					t.Errorf("backoffLimitPerIndex %d and backoffLimit %d, want both %d", got, *j.Spec.BackoffLimit, want)
				}
				back.Spec.BackoffLimitPerIndex = written.Spec.BackoffLimitPerIndex
			}
			delete(back.Annotations, RestartBudgetDefaultedAnnotation)
			if len(back.Annotations) == 0 {
				back.Annotations = written.Annotations
			}
			if d := cmp.Diff(written, back); d != "" {
				t.Errorf("admission changed more than the restart budget (-written,+admitted):\n%s", d)
			}
			warnings := (&Job{j}).RestartBudgetWarnings()
			switch {
			case tc.warn == "" && len(warnings) > 0:
				t.Errorf("want no warning, got %q", warnings)
			case tc.warn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warn)):
				t.Errorf("want one warning containing %q, got %q", tc.warn, warnings)
			}
			// The API server accepts what admission made.
			internal := &batch.Job{}
			if err := legacyscheme.Scheme.Convert(j, internal, nil); err != nil {
				t.Fatal(err)
			}
			if errs := batchvalidation.ValidateJobCreate(internal, batchvalidation.JobValidationOptions{}); len(errs) > 0 {
				t.Errorf("the API server would refuse the admitted Job: %v", errs.ToAggregate())
			}
		})
	}
}
