package devcluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/lockstep-dev/lockstep/internal/certs"
)

// pki is the certificate authority and key material of one local cluster.
// Everything lives under dir/pki; nothing is shared between clusters.
type pki struct {
	dir string
	ca  *certs.CA
}

// certValidity is long enough for any dev session, short enough that a leaked
// key from a forgotten .lockstep/ directory expires.
const certValidity = 30 * 24 * time.Hour

func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("lockstep-dev-ca", certValidity)
	if err != nil {
		return nil, err
	}
	p := &pki{dir: dir, ca: ca}
	return p, os.WriteFile(p.path("ca.crt"), ca.CertPEM, 0o600)
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p *pki) write(name, blockType string, der []byte) error {
	return os.WriteFile(p.path(name), pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}

// issue writes <name>.crt and <name>.key signed by the CA. A serving
// certificate gets the loopback SANs; a client certificate carries the user
// (CN) and groups (O) the API server authenticates.
func (p *pki) issue(name, cn string, groups []string, serving bool) error {
	r := certs.Request{CommonName: cn, Groups: groups, Validity: certValidity}
	if serving {
		r.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)}
		r.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	}
	pair, err := p.ca.Issue(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.path(name+".crt"), pair.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(p.path(name+".key"), pair.KeyPEM, 0o600)
}

// serviceAccountKey writes the RSA key pair kube-apiserver signs and verifies
// service account tokens with, and kube-controller-manager signs them with.
func (p *pki) serviceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := p.write("sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	return p.write("sa.pub", "PUBLIC KEY", pub)
}
