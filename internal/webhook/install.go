package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/webhook/config"
)

// Install writes what the Helm chart ships for admission — the admission
// policy that confines webhookUsers (the identities the webhook runs as) to
// the CA bundle, both webhook configurations (no caBundle yet) and the
// empty Secret the webhook keeps its certificate in — for the local control
// plane, where no chart is installed. It runs with the installer's (admin)
// identity, never the webhook's. The policy goes first, so the webhook is
// never able to change its configurations without it.
func Install(ctx context.Context, client kubernetes.Interface, e config.Endpoint, secretNamespace, secretName string, webhookUsers []string) error {
	adm := client.AdmissionregistrationV1()
	policy, binding := config.CAPolicy(webhookUsers)
	if err := upsert(ctx, adm.ValidatingAdmissionPolicies(), policy); err != nil {
		return err
	}
	if err := upsert(ctx, adm.ValidatingAdmissionPolicyBindings(), binding); err != nil {
		return err
	}
	mutating, validating := config.Configurations(e, config.JobControllerUsers)
	if err := upsert(ctx, adm.MutatingWebhookConfigurations(), mutating); err != nil {
		return err
	}
	if err := upsert(ctx, adm.ValidatingWebhookConfigurations(), validating); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName}, Type: corev1.SecretTypeOpaque}
	if _, err := client.CoreV1().Secrets(secretNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
