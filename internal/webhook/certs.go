package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockstep-dev/lockstep/internal/certs"
)

// Validities and margins of the self-managed PKI: a long-lived CA (the one
// the API server trusts, so it changes rarely) signs a serving certificate
// that is renewed well before it expires.
const (
	caValidity      = 10 * 365 * 24 * time.Hour
	caRenewBefore   = 365 * 24 * time.Hour
	certValidity    = 365 * 24 * time.Hour
	certRenewBefore = 30 * 24 * time.Hour
	// rotationCheck is how often a running webhook checks its certificate.
	rotationCheck = time.Hour
)

// Secret keys.
const (
	keyCACert = "ca.crt"
	keyCAKey  = "ca.key"
	// keyCABundle is what the API server trusts: the current CA and, for a
	// year after a CA renewal, the previous one.
	keyCABundle = "ca-bundle.crt"
	keyCert     = corev1.TLSCertKey
	keyKey      = corev1.TLSPrivateKeyKey
)

// rotator keeps the webhook's serving certificate valid while it runs — not
// only at start: it renews the certificate (and, rarely, the CA) in the
// Secret shared by replicas, writes the pair to the cert directory (the
// webhook server reloads it when the files change) and injects the CA into
// the two webhook configurations. It needs only get/update on that one
// Secret and get/patch on those two configurations; it creates nothing,
// and CAPolicy refuses any patch of its that changes more than caBundle.
//
// It is written here rather than taken from
// github.com/open-policy-agent/cert-controller, the rotator Kueue and JobSet
// use, because that one watches every webhook configuration of the cluster
// and every Secret of the namespace and updates whole objects — rights the
// webhook's identity must not have.
type rotator struct {
	client   kubernetes.Interface
	secret   types.NamespacedName
	ips      []net.IP
	dnsNames []string
	certDir  string
	// configs are the webhook configurations whose caBundle is kept current.
	mutating, validating string

	ready atomic.Bool
}

// Start implements manager.Runnable: check now, then every rotationCheck.
func (r *rotator) Start(ctx context.Context) error {
	logger := ctrl.LoggerFrom(ctx).WithName("cert-rotator")
	t := time.NewTicker(rotationCheck)
	defer t.Stop()
	for {
		if err := r.sync(ctx); err != nil {
			logger.Error(err, "Checking the serving certificate", "secret", r.secret)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica serves, so every replica keeps its files current.
func (r *rotator) NeedLeaderElection() bool { return false }

// Ready reports whether certificates are in place and the CA injected.
func (r *rotator) Ready() bool { return r.ready.Load() }

// sync makes the Secret hold a valid pair (renewing what is expiring; a
// replica that loses the write race takes the winner's), writes the files
// and injects the CA bundle.
func (r *rotator) sync(ctx context.Context) error {
	var data map[string][]byte
	for attempt := 0; ; attempt++ {
		s, err := r.client.CoreV1().Secrets(r.secret.Namespace).Get(ctx, r.secret.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("secret %s does not exist: the Helm chart (or `lockstep dev up`) creates it, empty; the webhook only fills it", r.secret)
		}
		if err != nil {
			return err
		}
		next, changed, err := renew(s.Data, r.ips, r.dnsNames)
		if err != nil {
			return err
		}
		if !changed {
			data = next
			break
		}
		s.Data = next
		if _, err := r.client.CoreV1().Secrets(r.secret.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err == nil {
			data = next
			break
		} else if !apierrors.IsConflict(err) || attempt == 3 {
			return err
		}
	}
	if err := writeCertDir(r.certDir, data[keyCert], data[keyKey]); err != nil {
		return err
	}
	if err := r.injectCA(ctx, data[keyCABundle]); err != nil {
		return err
	}
	r.ready.Store(true)
	return nil
}

// renew returns the Secret data with a valid CA and serving pair, and
// whether anything changed.
func renew(data map[string][]byte, ips []net.IP, dnsNames []string) (map[string][]byte, bool, error) {
	out := map[string][]byte{}
	for k, v := range data {
		out[k] = v
	}
	changed := false
	ca, err := certs.ParseCA(data[keyCACert], data[keyCAKey])
	if err != nil || time.Until(ca.Cert.NotAfter) < caRenewBefore {
		old := data[keyCACert]
		if ca, err = certs.NewCA("lockstep-webhook-ca", caValidity); err != nil {
			return nil, false, err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return nil, false, err
		}
		out[keyCACert], out[keyCAKey] = ca.CertPEM, key
		// Trust the previous CA too until the API server has the new one.
		bundle := append([]byte(nil), ca.CertPEM...)
		if exp, err := certs.Expires(old); err == nil && time.Now().Before(exp) {
			bundle = append(bundle, old...)
		}
		out[keyCABundle] = bundle
		changed = true
	}
	if len(out[keyCABundle]) == 0 {
		out[keyCABundle] = out[keyCACert]
		changed = true
	}
	if changed || certs.ValidFor(out[keyCACert], data[keyCert], ips, dnsNames, certRenewBefore) != nil {
		pair, err := ca.Issue(certs.Request{CommonName: "lockstep-webhook", IPs: ips, DNSNames: dnsNames, Validity: certValidity})
		if err != nil {
			return nil, false, err
		}
		out[keyCert], out[keyKey] = pair.CertPEM, pair.KeyPEM
		changed = true
	}
	return out, changed, nil
}

// injectCA patches the caBundle of every webhook of both configurations
// that does not carry it yet (a strategic merge patch keyed by webhook name).
func (r *rotator) injectCA(ctx context.Context, bundle []byte) error {
	adm := r.client.AdmissionregistrationV1()
	m, err := adm.MutatingWebhookConfigurations().Get(ctx, r.mutating, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var names []string
	for _, w := range m.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			names = append(names, w.Name)
		}
	}
	if len(names) > 0 {
		if _, err := adm.MutatingWebhookConfigurations().Patch(ctx, r.mutating, types.StrategicMergePatchType, caPatch(names, bundle), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, r.validating, metav1.GetOptions{})
	if err != nil {
		return err
	}
	names = nil
	for _, w := range v.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			names = append(names, w.Name)
		}
	}
	if len(names) > 0 {
		if _, err := adm.ValidatingWebhookConfigurations().Patch(ctx, r.validating, types.StrategicMergePatchType, caPatch(names, bundle), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func caPatch(names []string, bundle []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString(bundle)
	var buf bytes.Buffer
	buf.WriteString(`{"webhooks":[`)
	for i, n := range names {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"name":%q,"clientConfig":{"caBundle":%q}}`, n, b64)
	}
	buf.WriteString(`]}`)
	return buf.Bytes()
}

// writeCertDir writes the pair where the webhook server reads it, only
// when it changed (the server's certificate watcher reloads on change).
func writeCertDir(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		path := filepath.Join(dir, name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}
