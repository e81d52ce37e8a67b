package install

import (
	"bytes"
	"context"
	"encoding/base64"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webhookconfig "github.com/lockstep-dev/lockstep/internal/webhook/config"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// webhookSA is the chart's webhook identity in the test's release.
var webhookSA = webhookconfig.WebhookServiceAccount(releaseNS)

// webhookConfinedToCABundle: what the chart's webhook ServiceAccount may do
// with webhook configurations, as `kubectl auth can-i` reports it, and what
// the API server does with its requests (server-side dry runs with its own
// token): it may patch its two configurations — and the
// CA-injection policy admits a change of their caBundle — but a patch that
// widens the rules to every resource or points a webhook at an external URL
// is refused by that policy, and it can neither create, update nor delete a
// configuration, touch another one, or remove the policy.
func webhookConfinedToCABundle(t *testing.T, ctx context.Context, h *harness.Harness, saKubeconfig string) {
	t.Helper()
	for _, tc := range []struct {
		verb, resource string
		want           string
	}{
		{"patch", "validatingwebhookconfigurations/lockstep", "yes"},
		{"patch", "mutatingwebhookconfigurations/lockstep", "yes"},
		{"get", "validatingwebhookconfigurations/lockstep", "yes"},
		{"update", "validatingwebhookconfigurations/lockstep", "no"},
		{"delete", "validatingwebhookconfigurations/lockstep", "no"},
		{"create", "validatingwebhookconfigurations", "no"},
		{"create", "mutatingwebhookconfigurations", "no"},
		{"patch", "validatingwebhookconfigurations/someone-else", "no"},
		{"patch", "validatingadmissionpolicies/" + webhookconfig.CAPolicyName, "no"},
		{"delete", "validatingadmissionpolicies/" + webhookconfig.CAPolicyName, "no"},
		{"patch", "validatingadmissionpolicybindings/" + webhookconfig.CAPolicyName, "no"},
		{"delete", "validatingadmissionpolicybindings/" + webhookconfig.CAPolicyName, "no"},
		{"create", "validatingadmissionpolicybindings", "no"},
	} {
		out, _ := exec.Command(filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig, "auth", "can-i", tc.verb, tc.resource, "--as", webhookSA).Output()
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("kubectl auth can-i %s %s --as %s: %s, want %s", tc.verb, tc.resource, webhookSA, got, tc.want)
		}
	}

	const refusal = "ValidatingAdmissionPolicy '" + webhookconfig.CAPolicyName + "'"
	everything := `[{"op":"replace","path":"/webhooks/0/rules","value":[{"apiGroups":["*"],"apiVersions":["*"],"resources":["*"],"operations":["*"],"scope":"*"}]}]`
	external := `[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://collector.example.com/admission"}]`
	// Any bytes will do for a dry run: the API server does not parse them.
	newCA := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n"))
	for _, tc := range []struct {
		name, kind, patch string
		refused           bool
	}{
		{"rules matching every resource", "validatingwebhookconfiguration", everything, true},
		{"rules matching every resource (mutating)", "mutatingwebhookconfiguration", everything, true},
		{"an external URL", "validatingwebhookconfiguration", external, true},
		{"failurePolicy Ignore", "validatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`, true},
		{"a new caBundle", "validatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"` + newCA + `"}]`, false},
	} {
		out, err := dryRunPatch(h, saKubeconfig, tc.kind, tc.patch)
		switch {
		case tc.refused && (err == nil || !strings.Contains(out, refusal) || !strings.Contains(out, "may change only webhooks[*].clientConfig.caBundle")):
			t.Errorf("%s, as the webhook: want a refusal by %s naming what it may change, got %v: %s", tc.name, refusal, err, out)
		case !tc.refused && err != nil:
			t.Errorf("%s, as the webhook: want it admitted, got %v: %s", tc.name, err, out)
		}
	}
	out, err := exec.Command(filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", saKubeconfig, "delete", "validatingwebhookconfiguration", "lockstep", "--dry-run=server").CombinedOutput()
	if err == nil {
		t.Errorf("the webhook deleted its configuration (dry run): %s", out)
	}
}

// dryRunPatch patches configuration "lockstep" of kind with a JSON patch,
// server-side dry run, as the identity of kubeconfig.
func dryRunPatch(h *harness.Harness, kubeconfig, kind, patch string) (string, error) {
	out, err := exec.Command(filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", kubeconfig, "patch", kind, "lockstep",
		"--type=json", "-p", patch, "--dry-run=server").CombinedOutput()
	return string(out), err
}

// rotateCA empties the webhook's Secret (as an administrator would to
// force a new CA), starts the webhook with restart, and checks that the
// webhook — as the chart's ServiceAccount, through the policy — wrote the
// new CA into every webhook of both configurations, and that admission
// works with it (a PodGroup is validated by the webhook over TLS).
func rotateCA(t *testing.T, ctx context.Context, h *harness.Harness, restart func()) {
	t.Helper()
	secrets := h.Client.CoreV1().Secrets(releaseNS)
	s, err := secrets.Get(ctx, "lockstep-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Data["ca-bundle.crt"]
	s.Data = nil
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restart()
	s, err = secrets.Get(ctx, "lockstep-webhook-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := s.Data["ca-bundle.crt"]
	if len(after) == 0 || bytes.Equal(after, before) {
		t.Fatalf("the webhook made no new CA")
	}
	adm := h.Client.AdmissionregistrationV1()
	m, err := adm.MutatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, w := range m.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, after) {
			stale = append(stale, w.Name)
		}
	}
	for _, w := range v.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, after) {
			stale = append(stale, w.Name)
		}
	}
	if len(stale) > 0 {
		t.Errorf("webhooks without the new CA after the rotation: %v", stale)
	}
	ns := h.Namespace(t)
	if err := h.CreatePodGroupErr(ctx, builders.GangPodGroup(ns, "after-rotation", 2)); err != nil {
		t.Errorf("a PodGroup after the CA rotation (the webhook validates it): %v", err)
	}
	pg := builders.GangPodGroup(ns, strings.Repeat("x", 64), 2)
	if err := h.CreatePodGroupErr(ctx, pg); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a PodGroup named with 64 characters must be refused by the webhook after the rotation, got %v", err)
	}
}
