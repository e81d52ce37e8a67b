package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// JobValidator rejects jobs of one integration (a Job, a JobSet, …)
// targeting Lockstep whose gang annotations or priority class cannot work.
type JobValidator struct {
	reads
	topologyView
	Integration jobintegration.Integration
	// Claims warns, once per job, about the templates' claims (its pods'
	// admission is skipped when the Job controller creates them).
	Claims *claimChecks
}

var _ admission.CustomValidator = (*JobValidator)(nil) //nolint:staticcheck // SA1019: one validator for every integration's kind; the typed Validator[T] needs one type per kind

func (v *JobValidator) wrap(o runtime.Object) (jobintegration.GenericJob, error) {
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T", o)
	}
	return v.Integration.Wrap(obj), nil
}

// ValidateCreate implements admission.CustomValidator.
func (v *JobValidator) ValidateCreate(ctx context.Context, o runtime.Object) (admission.Warnings, error) {
	j, err := v.wrap(o)
	if err != nil {
		return nil, err
	}
	warnings, err := v.validate(ctx, j, nil)
	ns := namespaceOf(ctx, j.Object().GetNamespace())
	if err == nil {
		w, err := v.namedByOthers(ctx, ns, j)
		if err != nil {
			return warnings, apierrors.NewInternalError(err)
		}
		warnings = append(warnings, w...)
	}
	if v.Claims != nil && jobintegration.TargetsLockstep(j) {
		for _, r := range j.Roles() {
			for _, pc := range r.Template.Spec.ResourceClaims {
				warnings = append(warnings, v.Claims.claimWarnings(ctx, ns, pc.Name, claimSource{pc.ResourceClaimName, pc.ResourceClaimTemplateName})...)
			}
			warnings = append(warnings, v.Claims.driverPathWarnings(ctx, ns, r.Path, &r.Template.Spec, v.Nodes)...)
			warnings = append(warnings, v.Claims.extendedPathWarnings(r.Path, &r.Template.Spec, v.Nodes)...)
		}
	}
	return warnings, err
}

// ValidateUpdate implements admission.CustomValidator: the new job must be
// valid, and its disruption mode and gang scope cannot change — the gang's
// PodGroups fix them at creation (a minCount change is applied to the live
// gang).
func (v *JobValidator) ValidateUpdate(ctx context.Context, oldObj, o runtime.Object) (admission.Warnings, error) {
	j, err := v.wrap(o)
	if err != nil {
		return nil, err
	}
	old, err := v.wrap(oldObj)
	if err != nil {
		return nil, err
	}
	warnings, err := v.validate(ctx, j, old)
	if err != nil || !integrationSet.Gang(old) {
		return warnings, err
	}
	kind := j.GVK().Kind
	var errs field.ErrorList
	key := jobintegration.DisruptionModeAnnotation
	if was, is := modeOf(old.Object().GetAnnotations()[key]), modeOf(j.Object().GetAnnotations()[key]); was != is {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(key),
			fmt.Sprintf("the gang's disruption mode is fixed when its PodGroup is created (it is %q): restore the annotation, or delete and recreate the %s to change it", was, kind)))
	}
	for _, key := range topologyAnnotations {
		if was, is := old.Object().GetAnnotations()[key], j.Object().GetAnnotations()[key]; was != is {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(key),
				fmt.Sprintf("the gang's %s is fixed when its PodGroup is created (it is %q): restore the annotation, or delete and recreate the %s to change it", fixedWhat(key), was, kind)))
		}
	}
	if was, is := jobintegration.Scope(old), jobintegration.Scope(j); was != is {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(jobintegration.GangScopeAnnotation),
			fmt.Sprintf("the gang scope is fixed when the PodGroups are created (it is %q): restore the annotation, or delete and recreate the %s to change it", was, kind)))
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(j.GVK().GroupKind(), j.Object().GetName(), errs)
}

// namesTaken refuses a new gang job whose groups' names are taken by
// PodGroups it will not control: a user's made before it, another kind's
// job's of the same name (an earlier job of its kind and name is on its way
// out with that job, and its group is made once it is gone).
func (v *JobValidator) namesTaken(ctx context.Context, ns string, j jobintegration.GenericJob, groups []jobintegration.Group) field.ErrorList {
	gvk := j.GVK()
	var errs field.ErrorList
	for _, g := range groups {
		pg, err := v.podGroup(ctx, ns, g.Name)
		if err != nil {
			continue // none (or none seen yet: the reconciler judges it then)
		}
		ref := metav1.GetControllerOf(pg)
		if ref != nil && ref.Kind == gvk.Kind && ref.APIVersion == gvk.GroupVersion().String() && ref.Name == j.Object().GetName() {
			continue
		}
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), notTheGang(g.Name, gvk.Kind, j.Object().GetName(), ref)))
	}
	return errs
}

// topologyAnnotations are a job's topology annotations, fixed once its
// gang exists.
var topologyAnnotations = []string{lockv1.RequiredTopologyAnnotation, lockv1.PreferredTopologyAnnotation, lockv1.DeviceTopologyAnnotation, lockv1.CapacityTypesAnnotation,
	lockv1.MinRuntimeAnnotation, lockv1.PreemptionNoticeAnnotation, lockv1.PreemptionDelayAnnotation, lockv1.MaxRuntimeAnnotation}

// fixedWhat is what a fixed annotation of a job sets.
func fixedWhat(key string) string {
	switch key {
	case lockv1.MinRuntimeAnnotation:
		return "minimum runtime"
	case lockv1.PreemptionNoticeAnnotation:
		return "preemption notice"
	case lockv1.PreemptionDelayAnnotation:
		return "preemption delay"
	case lockv1.MaxRuntimeAnnotation:
		return "maximum runtime"
	}
	return "topology"
}

// modeOf normalizes the disruption-mode annotation ("" is all).
func modeOf(v string) string {
	if v == "" {
		return "all"
	}
	return v
}

// ValidateDelete implements admission.CustomValidator.
func (v *JobValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// validate checks a job; creating, also that no group of its gang's names
// exists that it would not control (Lockstep never adopts one).
func (v *JobValidator) validate(ctx context.Context, j jobintegration.GenericJob, old jobintegration.GenericJob) (admission.Warnings, error) {
	creating := old == nil
	obj := j.Object()
	c := integrationSet.Classify(j)
	if c.Class == jobintegration.ClassChild {
		// A job another integration controls (a JobSet's Job) was
		// checked as part of its parent.
		return nil, nil
	}
	if !jobintegration.TargetsLockstep(j) {
		// A template with the membership label but another scheduler:
		// the pod mutation makes its pods Lockstep's, members of the
		// group it names.
		return v.labelledOnly(ctx, j)
	}
	meta := field.NewPath("metadata", "annotations")
	ann := obj.GetAnnotations()
	var errs field.ErrorList
	var nq *jobintegration.NotQualified
	// (The kind's own minimum, without the annotation, is checked with its
	// fields.)
	var lowered string
	if v, set := ann[jobintegration.MinCountAnnotation]; set {
		n, err := jobintegration.MinCount(j)
		switch {
		case errors.As(err, &nq):
			errs = append(errs, field.Invalid(meta.Key(jobintegration.MinCountAnnotation), v, nq.Error()))
		case err == nil && n < jobintegration.Size(j):
			lowered = fmt.Sprintf("%s: %d is below the job's %d pods: Lockstep starts it once %d are placed and places the rest as room frees; a framework that assumes a fixed world size (torchrun with a fixed --nnodes, MPI, NCCL with a WORLD_SIZE) waits for the missing ranks or fails — set min-count only for training that is elastic",
				meta.Key(jobintegration.MinCountAnnotation), n, jobintegration.Size(j), n)
		}
	}
	if _, err := jobintegration.DisruptionMode(j); errors.As(err, &nq) {
		errs = append(errs, field.Invalid(meta.Key(jobintegration.DisruptionModeAnnotation), ann[jobintegration.DisruptionModeAnnotation], nq.Error()))
	}
	if nq := jobintegration.ScopeError(j); nq != nil {
		errs = append(errs, field.Invalid(meta.Key(jobintegration.GangScopeAnnotation), ann[jobintegration.GangScopeAnnotation], nq.Error()))
	}
	topo, nq := jobintegration.TopologyOf(j)
	if nq != nil {
		for _, key := range topologyAnnotations {
			if v, set := ann[key]; set && strings.Contains(nq.Condition, key) {
				errs = append(errs, field.Invalid(meta.Key(key), v, nq.Error()))
			}
		}
	}
	if fv, ok := j.(jobintegration.FieldValidator); ok {
		errs = append(errs, newProblems(fv.ValidateFields(), old)...)
	}
	ns := namespaceOf(ctx, obj.GetNamespace())
	for _, r := range j.Roles() {
		errs = append(errs, prunedClaims(j, r)...)
		errs = append(errs, validatePriority(ctx, v.Cached, r.Path.Child("spec"), r.Template.Spec.PriorityClassName, nil)...)
	}
	// The roles' pods join the groups their templates name: none may be
	// another job's gang; a new gang job's own names may not be taken.
	named, warnings, err := v.namedGroups(ctx, ns, j)
	if err != nil {
		return nil, err
	}
	errs = append(errs, named...)
	if creating && c.Class == jobintegration.ClassGang {
		errs = append(errs, v.namesTaken(ctx, ns, j, c.Groups)...)
	}
	// A template naming its own group is no warning: its pods join it. A
	// job refused is not told it would not be a gang.
	if c.Class == jobintegration.ClassNotQualified && len(errs) == 0 {
		warnings = append(warnings, "not a gang, its pods will be scheduled one by one: "+c.Why.Error())
	}
	if lowered != "" && c.Class == jobintegration.ClassGang {
		warnings = append(warnings, lowered)
	}
	if nq == nil && c.Class == jobintegration.ClassGang {
		pg := topo.AsPodGroup()
		warnings = append(warnings, v.topologyWarnings("job", pg, func(int) *field.Path {
			return meta.Key(lockv1.RequiredTopologyAnnotation)
		})...)
		warnings = append(warnings, spotOnlyTemplates(j, podgroup.GroupCapacityTypes(pg, podgroup.DefaultCapacityTypes))...)
	}
	if nq == nil {
		warnings = append(warnings, kueueTopologyWarnings(j, c.Class == jobintegration.ClassGang, topo)...)
	}
	if w, ok := j.(jobintegration.Warner); ok {
		warnings = append(warnings, w.Warnings()...)
	}
	if b, ok := j.(jobintegration.RestartBudgeter); ok && jobintegration.RestartsWhole(c.Class) {
		warnings = append(warnings, b.RestartBudgetWarnings()...)
	}
	if len(errs) == 0 {
		return warnings, nil
	}
	return warnings, apierrors.NewInvalid(j.GVK().GroupKind(), obj.GetName(), errs)
}

// JobDefaulter changes a job targeting Lockstep at its creation:
//   - a job whose pods a gang restart or preemption would take down
//     (jobintegration.RestartsWhole) and whose kind has a failure budget of
//     its own (a Job's backoffLimit) is given what keeps those disruptions
//     out of it (jobintegration.RestartBudgeter), recorded on the job;
//   - a gang job's groups are written into its pod templates, so its
//     controller creates every pod already in its group and no per-pod
//     webhook call is needed for it: the membership label, and
//     lockv1.GangOfAnnotation naming the job (its pods join only a group
//     the job controls). That part is an optimization: for a job with
//     generateName, whose name admission does not know yet, the pod
//     webhook labels each pod instead.
type JobDefaulter struct {
	Integration jobintegration.Integration
	// DropsSchedulingGroup: the API server does not serve
	// scheduling.k8s.io PodGroups, so it drops a pod template's
	// spec.schedulingGroup after this webhook has seen it; the group the
	// template names is kept as the membership label, which survives.
	DropsSchedulingGroup bool
}

var _ admission.CustomDefaulter = JobDefaulter{} //nolint:staticcheck // SA1019: one validator for every integration's kind; the typed Validator[T] needs one type per kind

// Default implements admission.CustomDefaulter.
func (d JobDefaulter) Default(_ context.Context, o runtime.Object) error {
	obj, ok := o.(client.Object)
	if !ok {
		return nil
	}
	j := d.Integration.Wrap(obj)
	if d.DropsSchedulingGroup {
		for _, r := range j.Roles() {
			keepNamedGroup(r.Template)
		}
	}
	c := integrationSet.Classify(j)
	if b, ok := j.(jobintegration.RestartBudgeter); ok && jobintegration.RestartsWhole(c.Class) {
		b.DefaultRestartBudget()
	}
	if _, perPod := j.(jobintegration.PodGrouper); perPod || obj.GetName() == "" || c.Class != jobintegration.ClassGang {
		return nil
	}
	for _, r := range j.Roles() {
		g := jobintegration.GroupFor(c.Groups, r.Name)
		if g == "" {
			continue // a Solo role's pods join no group
		}
		joinGang(&r.Template.ObjectMeta, g, jobintegration.GangOf(j))
	}
	return nil
}

// keepNamedGroup writes the group a pod template names through
// spec.schedulingGroup as the membership label, unless it has one: the
// API server is about to drop the field, and without the label the job
// would become a gang of Lockstep's own, ignoring the group the user wrote
// (and its topology).
func keepNamedGroup(t *corev1.PodTemplateSpec) {
	sg := t.Spec.SchedulingGroup
	if sg == nil || sg.PodGroupName == nil || *sg.PodGroupName == "" || t.Labels[lockv1.PodGroupLabel] != "" {
		return
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[lockv1.PodGroupLabel] = *sg.PodGroupName
}

// joinGang puts a pod (or a pod template) in group g, the gang Lockstep
// makes for job gangOf.
func joinGang(m *metav1.ObjectMeta, g, gangOf string) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[lockv1.PodGroupLabel] = g
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[lockv1.GangOfAnnotation] = gangOf
}

// prunedClaims refuses a template's resource claim that names no source: a
// CRD whose pod template schema is older than Kubernetes 1.31's (the
// Kubeflow training operator v1.8.1's) silently drops resourceClaimName and
// resourceClaimTemplateName, and every pod its controller creates would be
// refused by the API server — better refused here, saying why.
func prunedClaims(j jobintegration.GenericJob, r jobintegration.Role) field.ErrorList {
	var errs field.ErrorList
	for i, pc := range r.Template.Spec.ResourceClaims {
		if pc.ResourceClaimName == nil && pc.ResourceClaimTemplateName == nil {
			errs = append(errs, field.Required(r.Path.Child("spec", "resourceClaims").Index(i),
				fmt.Sprintf("resource claim %q names neither resourceClaimName nor resourceClaimTemplateName, so every pod of the %s would be refused; if you set one, the %s CRD's pod template schema is older than Kubernetes 1.31's and dropped it: install a newer CRD, or ask for the devices as an extended resource that a DRA DeviceClass serves (extendedResourceName)",
					pc.Name, j.GVK().Kind, j.GVK().Kind)))
		}
	}
	return errs
}

// spotOnlyTemplates warns about a gang job's pod template that selects
// Spot nodes (a node selector on the capacity-type label) while its
// capacity types leave spot out: its pods are never placed.
func spotOnlyTemplates(j jobintegration.GenericJob, policy podgroup.CapacityTypes) admission.Warnings {
	if policy.Allows(podgroup.Spot) {
		return nil
	}
	var out admission.Warnings
	for _, r := range j.Roles() {
		sel := r.Template.Spec.NodeSelector
		for key, spot := range map[string]string{podgroup.LabelKarpenterCapacityType: "spot", podgroup.LabelEKSCapacityType: "SPOT"} {
			if sel[key] == spot {
				out = append(out, fmt.Sprintf("%s: selects Spot nodes (%s=%s), but the job's capacity types (%s) leave spot out, so its pods are never placed; add %s: %s,spot (each Spot interruption restarts the gang whole) or select other capacity",
					r.Path.Child("spec", "nodeSelector").Key(key), key, spot, policy, lockv1.CapacityTypesAnnotation, policy))
			}
		}
	}
	return out
}

// newProblems are the errors of an update its old object did not have
// already (old nil: a creation, all of them): a job admitted before a
// check existed keeps working — its controller's and autoscaler's updates
// are not refused for what it always was.
func newProblems(errs field.ErrorList, old jobintegration.GenericJob) field.ErrorList {
	fv, ok := old.(jobintegration.FieldValidator)
	if old == nil || !ok {
		return errs
	}
	had := map[string]bool{}
	for _, e := range fv.ValidateFields() {
		had[e.Error()] = true
	}
	var out field.ErrorList
	for _, e := range errs {
		if !had[e.Error()] {
			out = append(out, e)
		}
	}
	return out
}
