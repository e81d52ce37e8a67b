package webhook

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/lockstep-dev/lockstep/internal/certs"
	"github.com/lockstep-dev/lockstep/internal/webhook/config"
)

// TestRotator: the webhook fills the empty Secret, writes the pair, injects
// the CA into every webhook of both configurations — with get, update and
// patch only — changes nothing while all is valid, and renews an expiring
// serving certificate with the same CA (so the API server's trust does not
// change).
func TestRotator(t *testing.T) {
	ctx := context.Background()
	mut, val := config.Configurations(config.Endpoint{ServiceNamespace: "lockstep-system", ServiceName: "lockstep-webhook", Port: 443}, config.JobControllerUsers)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "lockstep-system", Name: "lockstep-webhook-tls"}}
	client := fake.NewClientset(mut, val, secret)
	dir := t.TempDir()
	r := &rotator{client: client, secret: types.NamespacedName{Namespace: "lockstep-system", Name: "lockstep-webhook-tls"},
		dnsNames: []string{"lockstep-webhook.lockstep-system.svc"}, certDir: dir, mutating: config.MutatingConfigName, validating: config.ValidatingConfigName}
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := client.CoreV1().Secrets("lockstep-system").Get(ctx, "lockstep-webhook-tls", metav1.GetOptions{})
	if err := certs.ValidFor(s.Data[keyCACert], s.Data[keyCert], nil, r.dnsNames, 300*24*time.Hour); err != nil {
		t.Fatalf("the Secret holds no valid pair: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); !bytes.Equal(b, s.Data[keyCert]) {
		t.Errorf("tls.crt not written")
	}
	assertBundle(t, client, s.Data[keyCABundle])
	if !r.Ready() {
		t.Errorf("not ready after a successful sync")
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("the rotator created %s: it must only get, update and patch", a.GetResource().Resource)
		}
	}

	client.ClearActions()
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("nothing to renew, but the rotator did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}

	// A serving certificate that expires within the renewal margin.
	ca, err := certs.ParseCA(s.Data[keyCACert], s.Data[keyCAKey])
	if err != nil {
		t.Fatal(err)
	}
	short, err := ca.Issue(certs.Request{CommonName: "lockstep-webhook", DNSNames: r.dnsNames, Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.Data[keyCert], s.Data[keyKey] = short.CertPEM, short.KeyPEM
	if _, err := client.CoreV1().Secrets("lockstep-system").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	renewed, _ := client.CoreV1().Secrets("lockstep-system").Get(ctx, "lockstep-webhook-tls", metav1.GetOptions{})
	if bytes.Equal(renewed.Data[keyCert], short.CertPEM) || !bytes.Equal(renewed.Data[keyCACert], s.Data[keyCACert]) {
		t.Errorf("want a new serving certificate from the same CA")
	}
	if err := certs.ValidFor(renewed.Data[keyCACert], renewed.Data[keyCert], []net.IP(nil), r.dnsNames, 300*24*time.Hour); err != nil {
		t.Errorf("renewed pair invalid: %v", err)
	}
	assertBundle(t, client, s.Data[keyCABundle])
}

func assertBundle(t *testing.T, client *fake.Clientset, bundle []byte) {
	t.Helper()
	ctx := context.Background()
	m, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, config.MutatingConfigName, metav1.GetOptions{})
	v, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, config.ValidatingConfigName, metav1.GetOptions{})
	var all []admissionv1.WebhookClientConfig
	for _, w := range m.Webhooks {
		all = append(all, w.ClientConfig)
	}
	for _, w := range v.Webhooks {
		all = append(all, w.ClientConfig)
	}
	for i, c := range all {
		if !bytes.Equal(c.CABundle, bundle) {
			t.Errorf("webhook %d: caBundle not injected", i)
		}
	}
}
