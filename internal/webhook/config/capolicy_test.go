package config

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCAPolicy evaluates the CA-injection policy with kube-apiserver's CEL
// code: as the webhook's identity, a change of the caBundle alone — the
// first injection, a rotation, on either configuration — is admitted; a
// change of anything else (rules matching every resource, an external URL,
// a failure policy, match conditions, a webhook added or removed,
// metadata) is refused, and so are creating and deleting a configuration.
// An administrator's changes are not the policy's business.
func TestCAPolicy(t *testing.T) {
	const sa = "system:serviceaccount:lockstep-system:lockstep-webhook"
	policy, _ := CAPolicy([]string{sa, "lockstep-webhook"})
	mut, val := Configurations(Endpoint{ServiceNamespace: "lockstep-system", ServiceName: "lockstep-webhook", Port: 443}, JobControllerUsers)
	stored := func(o client.Object) {
		o.SetUID("uid-1")
		o.SetResourceVersion("41")
		o.SetGeneration(3)
		o.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	}
	stored(mut)
	stored(val)
	served := func(o client.Object) {
		// What the API server changes on every update.
		o.SetResourceVersion("42")
		o.SetGeneration(4)
		o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "lockstep", Operation: metav1.ManagedFieldsOperationUpdate}})
	}
	withCA := func(v *admissionv1.ValidatingWebhookConfiguration, ca string) *admissionv1.ValidatingWebhookConfiguration {
		v = v.DeepCopy()
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig.CABundle = []byte(ca)
		}
		served(v)
		return v
	}
	valEdit := func(edit func(*admissionv1.ValidatingWebhookConfiguration)) *admissionv1.ValidatingWebhookConfiguration {
		v := withCA(val, "ca-1")
		edit(v)
		return v
	}
	mutWithCA := mut.DeepCopy()
	for i := range mutWithCA.Webhooks {
		mutWithCA.Webhooks[i].ClientConfig.CABundle = []byte("ca-1")
	}
	served(mutWithCA)
	valGVK := admissionv1.SchemeGroupVersion.WithKind("ValidatingWebhookConfiguration")
	mutGVK := admissionv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration")
	update := func(user string, old, obj client.Object) request {
		gvk, res := valGVK, "validatingwebhookconfigurations"
		if _, ok := obj.(*admissionv1.MutatingWebhookConfiguration); ok {
			gvk, res = mutGVK, "mutatingwebhookconfigurations"
		}
		return request{op: admission.Update, obj: obj, old: old, gvk: gvk, resource: res, username: user}
	}
	for name, tc := range map[string]struct {
		req    request
		denied bool
	}{
		"first injection into the validating configuration": {req: update(sa, val, withCA(val, "ca-1"))},
		"first injection into the mutating configuration":   {req: update(sa, mut, mutWithCA)},
		"a rotation: a new bundle replaces the old":         {req: update(sa, withCA(val, "ca-1"), withCA(val, "ca-2\nca-1"))},
		"the local control plane's user injects":            {req: update("lockstep-webhook", val, withCA(val, "ca-1"))},
		"rules matching every resource": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Rules = []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.OperationAll},
				Rule: admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}
		})), denied: true},
		"an external URL": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].ClientConfig.Service = nil
			v.Webhooks[1].ClientConfig.URL = ptr.To("https://attacker.example.com/steal")
		})), denied: true},
		"another service port": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].ClientConfig.Service.Port = ptr.To[int32](8443)
		})), denied: true},
		"failurePolicy Ignore": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].FailurePolicy = ptr.To(admissionv1.Ignore)
		})), denied: true},
		"match conditions removed": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].MatchConditions = nil
		})), denied: true},
		"a webhook added": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			w := v.Webhooks[0]
			w.Name = "extra.example.com"
			v.Webhooks = append(v.Webhooks, w)
		})), denied: true},
		"a webhook removed": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks = v.Webhooks[1:]
		})), denied: true},
		"a webhook renamed": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].Name = "renamed.example.com"
		})), denied: true},
		"an annotation added (cert-manager's inject-ca-from)": {req: update(sa, val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) {
			v.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "evil/cert"}
		})), denied: true},
		"a mutating webhook reinvoked differently": {req: update(sa, mut, func() *admissionv1.MutatingWebhookConfiguration {
			m := mutWithCA.DeepCopy()
			m.Webhooks[0].ReinvocationPolicy = ptr.To(admissionv1.NeverReinvocationPolicy)
			return m
		}()), denied: true},
		"creating a configuration":        {req: request{op: admission.Create, obj: withCA(val, "ca-1"), gvk: valGVK, resource: "validatingwebhookconfigurations", username: sa}, denied: true},
		"deleting a configuration":        {req: request{op: admission.Delete, old: val, gvk: valGVK, resource: "validatingwebhookconfigurations", username: sa}, denied: true},
		"an administrator changing rules": {req: update("lockstep-admin", val, valEdit(func(v *admissionv1.ValidatingWebhookConfiguration) { v.Webhooks[0].Rules = nil }))},
	} {
		t.Run(name, func(t *testing.T) {
			msg := policyDenies(t, policy, tc.req)
			if got := msg != ""; got != tc.denied {
				t.Errorf("denied: want %v, got %v (%q)", tc.denied, got, msg)
			}
		})
	}
}
