package config

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
)

// Paths the server serves.
const (
	PathPodMutate      = "/mutate-pods"
	PathPodValidate    = "/validate-pods"
	PathPodGroup       = "/validate-podgroups"
	PathComposite      = "/validate-compositepodgroups"
	mutatingConfigName = "lockstep"
	validatingConfig   = "lockstep"
)

// CEL match conditions: only pods and Jobs that target Lockstep reach us —
// on update also a pod that carried the membership label, so removing it is
// seen — and only when there is something to do:
//   - mutation: a member that does not name Lockstep yet, a Job's pod
//     without its group (a gang Job's ranks normally arrive labelled from
//     its template, written by the Job mutation), or a pod in a Kueue pod
//     group that has not joined it;
//   - validation: not the pods the Job controller creates from a Job
//     template — the template was admitted (jobs.validate), every rank
//     shares its priority and group, and the scheduler counts a Job's gang
//     only from that Job's pods (podgroup.Admits) — so a 1,024-rank Job costs
//     no pod webhook call at all.
const (
	isMember           = `(has(object.metadata.labels) && "` + lockv1.PodGroupLabel + `" in object.metadata.labels)`
	ownedByJob         = `(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, o.kind == "Job" && o.apiVersion == "batch/v1"))`
	podTargetsLockstep = `object.spec.schedulerName == "lockstep" || ` + isMember
	podWasMember       = `oldObject != null && has(oldObject.metadata.labels) && "` + lockv1.PodGroupLabel + `" in oldObject.metadata.labels`
	podNeedsDefaults   = `(` + isMember + ` && object.spec.schedulerName != "lockstep") || (object.spec.schedulerName == "lockstep" && !` + isMember + ` && (` + ownedByJob + ` || has(object.spec.schedulingGroup)))`
)

// What an update must change to reach a validating webhook: only what the
// webhook judges, so that an outage never blocks the updates other
// controllers make on Lockstep objects — the Job controller removing its
// tracking finalizer from finished pods, Kueue resuming a suspended Job
// (spec.suspend and the template's scheduling directives), the garbage
// collector's finalizers — while every change the webhook judges still
// fails closed (failurePolicy Fail) when it is down:
//   - a pod: its group (PodValidator.ValidateUpdate judges nothing else;
//     priority, priorityClassName and schedulerName are immutable);
//   - a PodGroup: its spec, or its owners (a job's group is bounded by it);
//   - a Job: its Lockstep annotations, its spec but suspend and template,
//     the template's group label, and the template's spec but the
//     scheduling directives the API server lets a suspended Job change
//     (nodeSelector, tolerations, affinity, schedulingGates) — what Kueue
//     writes when it admits a Job. Other kinds' updates all reach their
//     webhook (judgedOnUpdate lists the kinds narrowed).
var (
	podChangesGroup   = `request.operation == "CREATE" || ` + celGroupOf("object") + ` != ` + celGroupOf("oldObject")
	podGroupJudged    = `request.operation == "CREATE" || object.spec != oldObject.spec || object.metadata.?ownerReferences.orValue([]) != oldObject.metadata.?ownerReferences.orValue([])`
	jobUnchangedForUs = sameWithPrefix("object.metadata.?annotations", "oldObject.metadata.?annotations", lockv1.GroupVersion.Group+"/") + " && " +
		sameBut("object.spec", "oldObject.spec", "suspend", "template") + " && " +
		fmt.Sprintf(`object.spec.template.?metadata.?labels[?%[1]q].orValue("") == oldObject.spec.template.?metadata.?labels[?%[1]q].orValue("")`, lockv1.PodGroupLabel) + " && " +
		sameBut("object.spec.template.spec", "oldObject.spec.template.spec", "nodeSelector", "tolerations", "affinity", "schedulingGates")
)

// namesAGroup are, by kind, CEL expressions true when a job's template
// carries the membership label: such a job reaches its validating webhook
// even when the template names another scheduler, for the pod mutation
// makes its pods Lockstep's and members of that group.
var namesAGroup = map[schema.GroupVersionKind]string{
	batchv1.SchemeGroupVersion.WithKind("Job"): `("` + lockv1.PodGroupLabel + `" in object.spec.template.?metadata.?labels.orValue({}))`,
}

// judgedOnUpdate are, by kind, CEL expressions true when an update leaves
// unchanged all that the kind's validation judges.
var judgedOnUpdate = map[schema.GroupVersionKind]string{
	batchv1.SchemeGroupVersion.WithKind("Job"): jobUnchangedForUs,
}

// updateJudged is the match condition of integ's validating webhook that
// lets through creations and the updates it must judge.
func updateJudged(integ jobintegration.Integration) (admissionv1.MatchCondition, bool) {
	same, ok := judgedOnUpdate[integ.GVK()]
	if !ok {
		return admissionv1.MatchCondition{}, false
	}
	return admissionv1.MatchCondition{Name: "changes-what-is-judged", Expression: `request.operation != "UPDATE" || !(` + same + `)`}, true
}

// inKueueGroup: an unlabelled, unbound Lockstep pod that names a Kueue pod
// group — at creation (plain pods), or when Kueue labels it later (a
// StatefulSet's pods), so it joins the group's PodGroup.
const inKueueGroup = `(object.spec.schedulerName == "lockstep" && !` + isMember + ` && !has(object.spec.schedulingGroup) && (!has(object.spec.nodeName) || object.spec.nodeName == "") && ` +
	`has(object.metadata.labels) && "` + kueuegroup.GroupNameLabel + `" in object.metadata.labels)`

// podNeedsDefaultsOf is the pod mutation's match condition: on creation,
// podNeedsDefaults, also matching the unlabelled Lockstep pods of
// integrations whose group is set per pod (a LeaderWorkerSet's, created by
// the StatefulSet controller); on creation and update, a pod that names a
// Kueue pod group and is not in a group yet.
func podNeedsDefaultsOf(set jobintegration.Set) string {
	var extra []string
	for _, integ := range set {
		if m, ok := integ.(interface{ PodAdmissionMatch() string }); ok {
			extra = append(extra, m.PodAdmissionMatch())
		}
	}
	onCreate := podNeedsDefaults
	if len(extra) > 0 {
		onCreate += ` || (object.spec.schedulerName == "lockstep" && !` + isMember + ` && (` + strings.Join(extra, " || ") + `))`
	}
	return `(request.operation == "CREATE" && (` + onCreate + `)) || ` + inKueueGroup
}

// PathJobMutate is the path of an integration's job mutation (e.g.
// /mutate-jobs).
func PathJobMutate(integ jobintegration.Integration) string { return "/mutate-" + integ.Resource() }

// PathJobValidate is the path of an integration's job validation (e.g.
// /validate-jobsets).
func PathJobValidate(integ jobintegration.Integration) string { return "/validate-" + integ.Resource() }

// integrationSet are the integrations whose jobs reach the webhook.
var integrationSet = integrations.All()

func integrationRule(integ jobintegration.Integration, ops ...admissionv1.OperationType) admissionv1.RuleWithOperations {
	gvk := integ.GVK()
	return rule(gvk.Group, gvk.Version, integ.Resource(), ops...)
}

// fromJobController matches a pod creation by the Job controller, as one
// of users (the identities the cluster's Job controller runs as).
func fromJobController(users []string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return `request.operation == "CREATE" && request.userInfo.username in [` + strings.Join(quoted, ", ") + `] && ` + ownedByJob
}

// JobControllerUsers are the identities the Job controller has: its own
// service account when kube-controller-manager runs with
// --use-service-account-credentials (the default of kubeadm, EKS, GKE and
// the local control plane), else kube-controller-manager's.
var JobControllerUsers = []string{"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}

// Endpoint is how the API server reaches the webhook: a URL base (the local
// control plane runs it out of cluster) or a Service.
type Endpoint struct {
	URL                           string
	ServiceNamespace, ServiceName string
	Port                          int32
}

func (e Endpoint) at(path string) admissionv1.WebhookClientConfig {
	if e.URL != "" {
		return admissionv1.WebhookClientConfig{URL: ptr.To(e.URL + path)}
	}
	return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{
		Namespace: e.ServiceNamespace, Name: e.ServiceName, Path: ptr.To(path), Port: ptr.To(e.Port),
	}}
}

func rule(group, version, resource string, ops ...admissionv1.OperationType) admissionv1.RuleWithOperations {
	return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
		APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: ptr.To(admissionv1.NamespacedScope),
	}}
}

// Configurations are Lockstep's webhook configurations, without caBundle
// (the webhook injects its CA, or cert-manager does): what the Helm chart
// ships and the local control plane installs. The webhook never creates
// them — its identity may only read and patch these two named objects, and
// CAPolicy admits no patch of its but one of caBundle.
// failurePolicy, per webhook (docs/admission.md):
//   - pod mutation: Fail — a gang rank created without its membership label
//     would be scheduled alone; only Lockstep-targeting pods are affected.
//   - Job mutation: Ignore — an optimization; the pod mutation covers it.
//   - PodGroup, CompositePodGroup and Job validation: Fail — they stop
//     manifests that can only deadlock; only Lockstep objects and
//     Lockstep-targeting Jobs are affected. A CompositePodGroup's spec is
//     fixed at creation (CRD schema), so only creations reach its webhook.
//   - pod validation: Fail — it stops a pod from taking a priority or a gang
//     it could not get through the API server's own admission; its warnings
//     never block.
//
// timeoutSeconds is 5 for all: every answer comes from caches in well under
// a millisecond, so only an unreachable webhook runs into it, and a short
// timeout fails such requests fast (the Job controller retries pod creation)
// instead of holding API server handlers.
func Configurations(cc Endpoint, jobControllers []string) (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration) {
	none := ptr.To(admissionv1.SideEffectClassNone)
	fail, ignore := ptr.To(admissionv1.Fail), ptr.To(admissionv1.Ignore)
	timeout := ptr.To[int32](5)
	mutating := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatingConfigName},
		Webhooks: []admissionv1.MutatingWebhook{
			{
				Name: "pods.mutate.scheduling.lockstep.dev", ClientConfig: cc.at(PathPodMutate),
				// UPDATE: Kueue labels a StatefulSet's pods with their group
				// after creation; the match condition lets only those through.
				Rules:         []admissionv1.RuleWithOperations{rule("", "v1", "pods", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
				MatchConditions:    []admissionv1.MatchCondition{{Name: "needs-defaults", Expression: podNeedsDefaultsOf(integrationSet)}},
				ReinvocationPolicy: ptr.To(admissionv1.IfNeededReinvocationPolicy),
			},
		},
	}
	validating := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatingConfig},
		Webhooks: []admissionv1.ValidatingWebhook{
			{
				Name: "podgroups.validate.scheduling.lockstep.dev", ClientConfig: cc.at(PathPodGroup),
				Rules:         []admissionv1.RuleWithOperations{rule(lockv1.GroupVersion.Group, lockv1.GroupVersion.Version, "podgroups", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: []admissionv1.MatchCondition{{Name: "changes-what-is-judged", Expression: podGroupJudged}},
			},
			{
				Name: "pods.validate.scheduling.lockstep.dev", ClientConfig: cc.at(PathPodValidate),
				Rules:         []admissionv1.RuleWithOperations{rule("", "v1", "pods", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: []admissionv1.MatchCondition{
					{Name: "targets-lockstep", Expression: podTargetsLockstep + " || " + podWasMember},
					{Name: "not-from-a-job-template", Expression: "!(" + fromJobController(jobControllers) + ")"},
					{Name: "creates-or-changes-the-group", Expression: podChangesGroup},
				},
			},
			{
				Name: "compositepodgroups.validate.scheduling.lockstep.dev", ClientConfig: cc.at(PathComposite),
				Rules:         []admissionv1.RuleWithOperations{rule(lockv1.GroupVersion.Group, lockv1.GroupVersion.Version, "compositepodgroups", admissionv1.Create)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
			},
		},
	}
	for _, integ := range integrationSet {
		match := []admissionv1.MatchCondition{{Name: "targets-lockstep", Expression: integ.AdmissionMatch()}}
		// Ignore: labelling the templates is an optimization only — without
		// it the pod webhook labels each pod. Fail for a Job, whose restart
		// budget it defaults: created without that, a gang restart would
		// cost the Job its backoffLimit (its validation fails closed too).
		policy := ignore
		if integ.GVK() == batchv1.SchemeGroupVersion.WithKind("Job") {
			policy = fail
		}
		mutating.Webhooks = append(mutating.Webhooks, admissionv1.MutatingWebhook{
			Name: integ.Resource() + ".mutate.scheduling.lockstep.dev", ClientConfig: cc.at(PathJobMutate(integ)),
			Rules:         []admissionv1.RuleWithOperations{integrationRule(integ, admissionv1.Create)},
			FailurePolicy: policy, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: match,
		})
		validate := match
		if named, ok := namesAGroup[integ.GVK()]; ok {
			validate = []admissionv1.MatchCondition{{Name: "targets-lockstep", Expression: "(" + integ.AdmissionMatch() + ") || " + named}}
		}
		if c, ok := updateJudged(integ); ok {
			validate = append(validate[:len(validate):len(validate)], c)
		}
		validating.Webhooks = append(validating.Webhooks, admissionv1.ValidatingWebhook{
			Name: integ.Resource() + ".validate.scheduling.lockstep.dev", ClientConfig: cc.at(PathJobValidate(integ)),
			Rules:         []admissionv1.RuleWithOperations{integrationRule(integ, admissionv1.Create, admissionv1.Update)},
			FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: validate,
		})
	}
	return mutating, validating
}

// Names of the two configurations.
const (
	MutatingConfigName   = mutatingConfigName
	ValidatingConfigName = validatingConfig
)
