package clientopts

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/client/clientset/versioned"
)

// Scope is what a user command addresses, and so which of -n and -A it
// takes.
type Scope int

const (
	// Cluster is a cluster-wide command: no -n (a namespace would be
	// ignored).
	Cluster Scope = iota
	// Namespaced addresses one namespace: -n, defaulting to the
	// context's namespace.
	Namespaced
	// Listing lists in one namespace (-n) or in all of them (-A).
	Listing
)

// Options are a command's connection flags and, after Complete, what they
// resolve to.
type Options struct {
	flags *genericclioptions.ConfigFlags
	scope Scope
	// component: a long-running component, which falls back to its pod's
	// service account.
	component bool
	// AllNamespaces is -A (Listing only).
	AllNamespaces bool

	// Config is the REST configuration (set by Complete).
	Config *rest.Config
	// Namespace is the namespace the command addresses (set by Complete):
	// -n, else the context's, else "default"; "" with -A or for a
	// Cluster-scoped command.
	Namespace string
}

// ForUser is the flag set of a command a user runs: all of kubectl's
// connection flags (--kubeconfig, --context, --cluster, --user, --server,
// --token, --as, --request-timeout, …), -n unless the command is
// cluster-wide, and -A if it lists.
func ForUser(scope Scope) *Options {
	f := genericclioptions.NewConfigFlags(true)
	// Lockstep's commands use no discovery cache: a --cache-dir would be
	// accepted and ignored.
	f.CacheDir = nil
	if scope == Cluster {
		f.Namespace = nil
	}
	return &Options{flags: f, scope: scope}
}

// WithoutClusterFlag drops kubectl's --cluster (the kubeconfig cluster to
// use) for a command whose --cluster means something else (`simulate`'s
// cluster spec file); --context still selects a cluster.
func (o *Options) WithoutClusterFlag() *Options {
	o.flags.ClusterName = nil
	return o
}

// ForComponent is the flag set of a long-running component (scheduler,
// controllers, webhook): --kubeconfig and --context. With neither, and no
// $KUBECONFIG or ~/.kube/config, it runs on the in-cluster configuration
// of its pod's service account.
func ForComponent() *Options {
	f := &genericclioptions.ConfigFlags{KubeConfig: ptr.To(""), Context: ptr.To("")}
	return &Options{flags: f, scope: Cluster, component: true}
}

// AddFlags registers the flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.flags.AddFlags(fs)
	if o.component {
		fs.Lookup("kubeconfig").Usage = "kubeconfig file (alone: $KUBECONFIG is then not read); without it, the files of $KUBECONFIG, else ~/.kube/config, else the pod's service account (in-cluster configuration)"
	}
	if o.scope == Listing {
		fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "list across all namespaces (-n is then not allowed)")
	}
}

// Complete loads the kubeconfig (or the in-cluster configuration) and
// resolves the namespace. It does not call the API server.
func (o *Options) Complete() error {
	loader := o.flags.ToRawKubeConfigLoader()
	raw, err := loader.RawConfig()
	if err != nil {
		return o.loadError(err)
	}
	if err := o.checkTarget(raw); err != nil {
		return err
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig (%s): %w", o.sources(), err)
	}
	o.Config = cfg
	if o.scope == Cluster || o.AllNamespaces {
		o.Namespace = ""
		return nil
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return fmt.Errorf("reading the namespace of the kubeconfig context: %w", err)
	}
	o.Namespace = ns
	return nil
}

// Validate refuses flags that contradict each other: -A with -n, and -A
// with names (a name is looked up in one namespace). names are the NAME
// arguments the command was given.
func (o *Options) Validate(names []string) error {
	if !o.AllNamespaces {
		return nil
	}
	if o.flags.Namespace != nil && *o.flags.Namespace != "" {
		return fmt.Errorf("-A (all namespaces) and -n %s both given: pass one of them", *o.flags.Namespace)
	}
	if len(names) > 0 {
		return fmt.Errorf("-A (all namespaces) with a name (%s): a name is looked up in one namespace; drop -A and pass -n NAMESPACE, or drop the name to list every namespace", names[0])
	}
	return nil
}

// Clients are the API clients a user command reads with, sharing one HTTP
// transport.
type Clients struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Lockstep versioned.Interface
}

// NewClients builds the clients for cfg. It does not call the API server.
func NewClients(cfg *rest.Config) (*Clients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	lock, err := versioned.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	return &Clients{Kube: kube, Dynamic: dyn, Lockstep: lock}, nil
}
