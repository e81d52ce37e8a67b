package config

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CAPolicyName names the ValidatingAdmissionPolicy (and its binding) that
// confines the webhook's identity to the CA bundle.
const CAPolicyName = "lockstep-webhook-ca-injection"

// WebhookServiceAccount is the identity the webhook runs as in a cluster
// (the chart's ServiceAccount in namespace ns).
func WebhookServiceAccount(ns string) string {
	return "system:serviceaccount:" + ns + ":lockstep-webhook"
}

// onlyCABundleChanged is the policy's main validation: what the webhook's
// identity may change in a webhook configuration is the caBundle of its
// webhooks' clientConfig, nothing else. Every other field is compared
// generically — by iterating the keys the objects have — so a field a
// later Kubernetes adds is covered too. Metadata the API server writes on
// every update (resourceVersion, generation, managedFields) may differ;
// labels, annotations (cert-manager's inject-ca-from), owners and
// finalizers may not. Webhooks are matched by name (unique in a
// configuration), so none can be added, removed or renamed.
func onlyCABundleChanged() string {
	return fmt.Sprintf(`request.operation != "UPDATE" || (%s && %s && `+
		`object.?webhooks.orValue([]).size() == oldObject.?webhooks.orValue([]).size() && `+
		`object.?webhooks.orValue([]).all(w, oldObject.webhooks.exists(o, o.name == w.name && %s && %s)))`,
		sameBut("object", "oldObject", "apiVersion", "kind", "metadata", "webhooks"),
		sameBut("object.metadata", "oldObject.metadata", "resourceVersion", "generation", "managedFields"),
		sameBut("w", "o", "clientConfig"),
		sameBut("w.clientConfig", "o.clientConfig", "caBundle"))
}

// CAPolicy is the ValidatingAdmissionPolicy and binding that leave the
// webhook's identities (users) no right over webhook configurations but
// the CA bundle. RBAC lets the webhook get and patch its two
// configurations (a patch cannot be limited to a field by RBAC); this
// policy refuses, for those users only, any create or delete of a webhook
// configuration and any update that changes more than caBundle — so
// whoever holds the webhook's token cannot register rules matching every
// resource, or an external URL, to read every Secret and pod. The API
// server runs admission policies on webhook configurations (it exempts
// only the policies' own kinds, which the webhook cannot touch either).
// failurePolicy Fail: a policy that cannot be evaluated refuses.
func CAPolicy(users []string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: CAPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{admissionv1.GroupName}, APIVersions: []string{"*"},
						Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}},
				}}},
			},
			MatchConditions: []admissionv1.MatchCondition{{Name: "the-webhooks-identity", Expression: `request.userInfo.username in [` + strings.Join(quoted, ", ") + `]`}},
			Validations: []admissionv1.Validation{
				{
					Expression: `request.operation == "UPDATE"`,
					Message:    "the Lockstep webhook's identity creates and deletes no webhook configuration: they are installed with Lockstep (the Helm chart, or lockstep dev up) by an administrator",
					Reason:     ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: onlyCABundleChanged(),
					Message:    "the Lockstep webhook's identity may change only webhooks[*].clientConfig.caBundle of a webhook configuration, and this request changes more (rules, clientConfig url or service, match conditions, failure policy, metadata, or the list of webhooks): change the configuration as an administrator (helm upgrade), never as the webhook",
					Reason:     ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: CAPolicyName},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        CAPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	return policy, binding
}
