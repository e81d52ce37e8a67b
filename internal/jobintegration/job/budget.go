package job

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// A gang restart — and a preemption — deletes running members after marking
// each DisruptionTarget=True. The Job controller counts a deleted pod as a
// failure against backoffLimit unless the Job's podFailurePolicy ignores it,
// so without a rule a 4-rank Job with the default backoffLimit of 6 fails on
// its second restart, and one with backoffLimit 0 on its first.
const (
	// RestartBudgetAnnotation on a Job (or a JobSet, for its Jobs) set to
	// RestartBudgetAsWritten keeps it exactly as written: Lockstep adds no
	// podFailurePolicy, and each member a gang restart deletes counts
	// against its backoffLimit (warned at admission).
	RestartBudgetAnnotation = "scheduling.lockstep.dev/restart-budget"
	RestartBudgetAsWritten  = "as-written"
	// RestartBudgetDefaultedAnnotation records, on a Job Lockstep's
	// admission changed, the fields it set ("podFailurePolicy,
	// podReplacementPolicy"), so what the Job runs with is never a surprise.
	RestartBudgetDefaultedAnnotation = "scheduling.lockstep.dev/restart-budget-defaulted"
)

// IgnoreDisruptions is the podFailurePolicy rule that keeps disruptions —
// Lockstep's gang restarts and preemptions, kube-scheduler's preemptions,
// the taint managers' and the kubelet's evictions, all of which set
// DisruptionTarget=True — out of a Job's failure count.
func IgnoreDisruptions() batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}
}

// DefaultRestartBudget makes a gang restart free for a Job of gang members
// that does not say so itself: with restartPolicy Never and no
// podFailurePolicy, it sets a policy of the one rule IgnoreDisruptions, and
// podReplacementPolicy Failed (the only value the API server accepts with a
// podFailurePolicy — the one it defaults to then; without a policy it
// defaulted TerminatingOrFailed before admission saw the Job), and makes an
// Indexed Job's backoff per index where that counts failures as before
// (perIndexAllowed). Every other failure counts exactly as the user wrote. It returns the fields it set,
// nil when it left the Job alone: a Job that already has a policy (warned
// by RestartBudgetWarnings when the policy counts disruptions), one with
// restartPolicy OnFailure (no policy allowed), or one annotated
// RestartBudgetAsWritten.
func DefaultRestartBudget(ann map[string]string, spec *batchv1.JobSpec) []string {
	if ann[RestartBudgetAnnotation] == RestartBudgetAsWritten ||
		spec.PodFailurePolicy != nil || spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return nil
	}
	spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{IgnoreDisruptions()}}
	set := []string{"podFailurePolicy"}
	if ptr.Deref(spec.PodReplacementPolicy, batchv1.Failed) != batchv1.Failed {
		spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		set = append(set, "podReplacementPolicy")
	}
	if perIndexAllowed(spec) {
		spec.BackoffLimitPerIndex = ptr.To(*spec.BackoffLimit)
		set = append(set, PerIndexBackoff)
	}
	return set
}

// PerIndexBackoff names backoffLimitPerIndex in RestartBudgetDefaultedAnnotation.
const PerIndexBackoff = "backoffLimitPerIndex"

// perIndexAllowed reports whether an Indexed Job's pod-failure backoff can
// be made per index without changing how its failures count. The Job
// controller paces replacements by the failed pods since the last success —
// ignored ones included, and kept only in its memory — so after a gang
// restart of n ranks a Job-wide backoff waits 10 s × 2^(n−1) (the 10 minute
// cap from 7 ranks), a per-index one 10 s. Setting backoffLimitPerIndex to
// the Job's backoffLimit, which stays, counts exactly as before: the
// Job-wide limit is checked first, and no index can fail more often than
// the whole Job. Not when the user chose either limit per index
// (maxFailedIndexes), or above 100,000 completions (where the API server
// requires maxFailedIndexes with it).
func perIndexAllowed(spec *batchv1.JobSpec) bool {
	return ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion &&
		spec.BackoffLimitPerIndex == nil && spec.MaxFailedIndexes == nil && spec.BackoffLimit != nil &&
		spec.Completions != nil && *spec.Completions <= 100_000
}

// RestartBudgetWarnings says, for a Job of gang members (what names it:
// "Job", "replicated job workers"), when a gang restart would still cost it
// its failure budget, and the fix: its own podFailurePolicy counts
// disruptions, or its pods restart OnFailure (no policy possible), or it
// asked to be kept as written.
func RestartBudgetWarnings(what string, ann map[string]string, spec *batchv1.JobSpec) []string {
	limit := fmt.Sprint(ptr.Deref(spec.BackoffLimit, 6))
	if spec.BackoffLimitPerIndex != nil {
		limit = fmt.Sprintf("%d per index", *spec.BackoffLimitPerIndex)
	}
	cost := fmt.Sprintf("each member a gang restart or preemption deletes counts as a failed pod against its backoffLimit (%s)", limit)
	switch {
	case spec.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure:
		return []string{fmt.Sprintf("%s has restartPolicy OnFailure, which allows no podFailurePolicy: %s; set restartPolicy: Never and Lockstep adds the rule that ignores disruptions (docs/integrity.md)", what, cost)}
	case spec.PodFailurePolicy != nil:
		if why := countsDisruptions(spec.PodFailurePolicy); why != "" {
			return []string{fmt.Sprintf("%s's podFailurePolicy %s: %s; put this rule first: {action: Ignore, onPodConditions: [{type: DisruptionTarget, status: \"True\"}]} (docs/integrity.md)", what, why, cost)}
		}
	case ann[RestartBudgetAnnotation] == RestartBudgetAsWritten && spec.Template.Spec.RestartPolicy == corev1.RestartPolicyNever:
		return []string{fmt.Sprintf("%s is kept as written (%s: %s): %s", what, RestartBudgetAnnotation, RestartBudgetAsWritten, cost)}
	}
	return nil
}

// countsDisruptions says how a podFailurePolicy would count a member that
// a gang restart stops ("" when it ignores it). Rules apply in order, the
// first that matches decides: a rule on DisruptionTarget=True decides
// exactly; an exit-code rule before it decides first when it matches the
// code of a process stopped by SIGTERM or, past its grace period, SIGKILL
// (143, 137) — a rank that traps SIGTERM and exits otherwise is its own
// author's to know.
func countsDisruptions(p *batchv1.PodFailurePolicy) string {
	for i, r := range p.Rules {
		if r.OnExitCodes != nil && r.Action != batchv1.PodFailurePolicyActionIgnore && matchesStopped(r.OnExitCodes) {
			return fmt.Sprintf("rule %d (%s on exit codes %s %v) matches a rank stopped by a gang restart (exit code 143 or 137) before any rule ignores it", i, r.Action, r.OnExitCodes.Operator, r.OnExitCodes.Values)
		}
		for _, c := range r.OnPodConditions {
			if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
				continue
			}
			if r.Action == batchv1.PodFailurePolicyActionIgnore {
				return ""
			}
			return fmt.Sprintf("rule %d (%s on DisruptionTarget) counts a rank stopped by a gang restart", i, r.Action)
		}
	}
	return "has no rule that ignores DisruptionTarget"
}

// matchesStopped reports whether an exit-code rule matches 143 or 137.
func matchesStopped(r *batchv1.PodFailurePolicyOnExitCodesRequirement) bool {
	for _, code := range podgroup.StopExitCodes {
		in := slices.Contains(r.Values, code)
		if in == (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
			return true
		}
	}
	return false
}

// defaulted is the RestartBudgetDefaultedAnnotation's value.
func defaulted(set []string) string { return strings.Join(set, ",") }
