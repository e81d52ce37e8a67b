package webhook

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/certs"
)

const (
	certValidity = 365 * 24 * time.Hour
	// renewBefore: a certificate closer than this to expiry is replaced.
	renewBefore = 30 * 24 * time.Hour
)

// servingCert returns the CA and serving pair stored in the Secret, creating
// or renewing them when missing, expiring, or not covering hosts. Replicas
// share the Secret; a lost create race re-reads the winner's.
func servingCert(ctx context.Context, client kubernetes.Interface, ns, name string, ips []net.IP, dnsNames []string) (caPEM, certPEM, keyPEM []byte, err error) {
	secrets := client.CoreV1().Secrets(ns)
	for attempt := 0; attempt < 3; attempt++ {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil && certs.ValidFor(s.Data["ca.crt"], s.Data["tls.crt"], ips, dnsNames, renewBefore) == nil {
			return s.Data["ca.crt"], s.Data["tls.crt"], s.Data["tls.key"], nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, nil, err
		}
		ca, err2 := certs.NewCA("lockstep-webhook-ca", certValidity)
		if err2 != nil {
			return nil, nil, nil, err2
		}
		pair, err2 := ca.Issue(certs.Request{CommonName: "lockstep-webhook", IPs: ips, DNSNames: dnsNames, Validity: certValidity})
		if err2 != nil {
			return nil, nil, nil, err2
		}
		data := map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM}
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}, metav1.CreateOptions{})
		} else {
			s.Data = data
			_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		}
		if err == nil {
			return ca.CertPEM, pair.CertPEM, pair.KeyPEM, nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return nil, nil, nil, err
		}
	}
	return nil, nil, nil, fmt.Errorf("could not settle the serving certificate in %s/%s", ns, name)
}

func writeCertDir(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600)
}
