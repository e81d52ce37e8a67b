package webhook

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Paths the server serves.
const (
	pathPodMutate      = "/mutate-pods"
	pathPodValidate    = "/validate-pods"
	pathPodGroup       = "/validate-podgroups"
	pathJob            = "/validate-jobs"
	mutatingConfigName = "lockstep"
	validatingConfig   = "lockstep"
)

// CEL match conditions: only pods and Jobs that target Lockstep reach us —
// on update also a pod that carried the membership label, so removing it is
// seen.
const (
	podTargetsLockstep = `object.spec.schedulerName == "lockstep" || (has(object.metadata.labels) && "` + lockv1.PodGroupLabel + `" in object.metadata.labels)`
	podWasMember       = `oldObject != null && has(oldObject.metadata.labels) && "` + lockv1.PodGroupLabel + `" in oldObject.metadata.labels`
	jobTargetsLockstep = `object.spec.template.spec.schedulerName == "lockstep"`
)

// clientConfig points the API server at the webhook: a URL (local control
// plane, out-of-cluster) or a Service.
type clientConfig struct {
	urlBase               string
	serviceNamespace, svc string
	port                  int32
	caBundle              []byte
}

func (c clientConfig) at(path string) admissionv1.WebhookClientConfig {
	if c.urlBase != "" {
		return admissionv1.WebhookClientConfig{URL: ptr.To(c.urlBase + path), CABundle: c.caBundle}
	}
	return admissionv1.WebhookClientConfig{CABundle: c.caBundle, Service: &admissionv1.ServiceReference{
		Namespace: c.serviceNamespace, Name: c.svc, Path: ptr.To(path), Port: ptr.To(c.port),
	}}
}

func rule(group, version, resource string, ops ...admissionv1.OperationType) admissionv1.RuleWithOperations {
	return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
		APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: ptr.To(admissionv1.NamespacedScope),
	}}
}

// ensureConfigurations writes both webhook configurations with the current
// caBundle. failurePolicy, per webhook (docs/admission.md):
//   - pod mutation: Fail — a gang rank created without its membership label
//     would be scheduled alone; only Lockstep-targeting pods are affected.
//   - PodGroup and Job validation: Fail — they stop manifests that can only
//     deadlock; only Lockstep objects and Lockstep-targeting Jobs are affected.
//   - pod validation: Fail — it stops a pod from taking a priority or a gang
//     it could not get through the API server's own admission; its warnings
//     never block.
//
// timeoutSeconds is 5 for all: every answer comes from caches in well under
// a millisecond, so only an unreachable webhook runs into it, and a short
// timeout fails such requests fast (the Job controller retries pod creation)
// instead of holding API server handlers.
func ensureConfigurations(ctx context.Context, client kubernetes.Interface, cc clientConfig) error {
	none := ptr.To(admissionv1.SideEffectClassNone)
	fail := ptr.To(admissionv1.Fail)
	timeout := ptr.To[int32](5)
	podMatch := []admissionv1.MatchCondition{{Name: "targets-lockstep", Expression: podTargetsLockstep}}
	mutating := &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutatingConfigName},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name: "pods.mutate.scheduling.lockstep.dev", ClientConfig: cc.at(pathPodMutate),
			Rules:         []admissionv1.RuleWithOperations{rule("", "v1", "pods", admissionv1.Create)},
			FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
			MatchConditions: podMatch, ReinvocationPolicy: ptr.To(admissionv1.IfNeededReinvocationPolicy),
		}},
	}
	validating := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: validatingConfig},
		Webhooks: []admissionv1.ValidatingWebhook{
			{
				Name: "podgroups.validate.scheduling.lockstep.dev", ClientConfig: cc.at(pathPodGroup),
				Rules:         []admissionv1.RuleWithOperations{rule(lockv1.GroupVersion.Group, lockv1.GroupVersion.Version, "podgroups", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
			},
			{
				Name: "jobs.validate.scheduling.lockstep.dev", ClientConfig: cc.at(pathJob),
				Rules:         []admissionv1.RuleWithOperations{rule("batch", "v1", "jobs", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: []admissionv1.MatchCondition{{Name: "targets-lockstep", Expression: jobTargetsLockstep}},
			},
			{
				Name: "pods.validate.scheduling.lockstep.dev", ClientConfig: cc.at(pathPodValidate),
				Rules:         []admissionv1.RuleWithOperations{rule("", "v1", "pods", admissionv1.Create, admissionv1.Update)},
				FailurePolicy: fail, SideEffects: none, TimeoutSeconds: timeout, AdmissionReviewVersions: []string{"v1"},
				MatchConditions: []admissionv1.MatchCondition{{Name: "targets-lockstep", Expression: podTargetsLockstep + " || " + podWasMember}},
			},
		},
	}
	if err := upsert(ctx, client.AdmissionregistrationV1().MutatingWebhookConfigurations(), mutating); err != nil {
		return err
	}
	return upsert(ctx, client.AdmissionregistrationV1().ValidatingWebhookConfigurations(), validating)
}
