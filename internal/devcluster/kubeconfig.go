package devcluster

import (
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client certificate identity of the local cluster.
type identity struct {
	file   string // kubeconfig name under kubeconfigs/
	cn     string
	groups []string
}

// identities are the users the control plane components and the admin
// authenticate as. The simulator acts as the kubelet of every node at once,
// which no single node identity is allowed to do, so it runs as an admin.
var identities = []identity{
	{file: "admin", cn: "lockstep-admin", groups: []string{"system:masters"}},
	{file: "kube-controller-manager", cn: "system:kube-controller-manager"},
	{file: "kube-scheduler", cn: "system:kube-scheduler"},
	{file: "kwok", cn: "lockstep-node-simulator", groups: []string{"system:masters"}},
	// Lockstep's components get only the RBAC in config/rbac.
	{file: "lockstep-scheduler", cn: "lockstep-scheduler"},
	{file: "lockstep-controllers", cn: "lockstep-controllers"},
	{file: "lockstep-webhook", cn: webhookUser},
}

// webhookUser is the identity `lockstep webhook` runs as.
const webhookUser = "lockstep-webhook"

func writeKubeconfig(path, server string, p *pki, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lockstep-dev"] = &clientcmdapi.Cluster{
		Server:               server,
		CertificateAuthority: p.path("ca.crt"),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificate: p.path(user + ".crt"),
		ClientKey:         p.path(user + ".key"),
	}
	cfg.Contexts["lockstep-dev"] = &clientcmdapi.Context{Cluster: "lockstep-dev", AuthInfo: user}
	cfg.CurrentContext = "lockstep-dev"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// writeCredentials creates the PKI and a kubeconfig per identity (and per
// extra one: real nodes'), plus the admin kubeconfig at the top of the state
// directory.
func writeCredentials(l layout, server string, extra ...identity) error {
	p, err := newPKI(l.pki())
	if err != nil {
		return err
	}
	if err := p.issue("apiserver", "kube-apiserver", nil, true); err != nil {
		return err
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	for _, id := range append(append([]identity(nil), identities...), extra...) {
		if err := p.issue(id.file, id.cn, id.groups, false); err != nil {
			return err
		}
		if err := writeKubeconfig(l.kubeconfig(id.file), server, p, id.file); err != nil {
			return err
		}
	}
	return writeKubeconfig(l.adminKubeconfig(), server, p, "admin")
}
