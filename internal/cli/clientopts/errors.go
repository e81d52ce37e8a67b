package clientopts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// devKubeconfig is where `lockstep dev up` writes the local cluster's
// kubeconfig: the first cluster many users of this CLI have.
const devKubeconfig = ".lockstep/dev/kubeconfig"

// loadError words a kubeconfig that could not be read.
func (o *Options) loadError(err error) error {
	if p := *o.flags.KubeConfig; p != "" && errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--kubeconfig %s: no such file: pass the path of an existing kubeconfig, or leave --kubeconfig out to use $KUBECONFIG or ~/.kube/config (`lockstep dev up` writes %s)", p, devKubeconfig)
	}
	return fmt.Errorf("reading the kubeconfig (%s): %w", o.sources(), err)
}

// checkTarget refuses, before the loader falls back to a default server
// (kubectl's http://localhost:8080), a kubeconfig that does not say which
// cluster to talk to: a --context it lacks, no current context, or no
// kubeconfig at all outside a pod.
func (o *Options) checkTarget(raw clientcmdapi.Config) error {
	if o.flags.APIServer != nil && *o.flags.APIServer != "" {
		return nil // --server names the cluster
	}
	context := *o.flags.Context
	switch {
	case context != "" && raw.Contexts[context] == nil && len(raw.Contexts) == 0:
		return fmt.Errorf("--context %s: %s, so there is no context to choose: pass --kubeconfig FILE or set $KUBECONFIG", context, o.sources())
	case context != "" && raw.Contexts[context] == nil:
		return fmt.Errorf("--context %s: no such context in the kubeconfig (%s): pass one of %s (`kubectl config get-contexts` lists them)", context, o.sources(), contextNames(raw.Contexts))
	case context == "" && raw.CurrentContext == "" && len(raw.Contexts) > 0:
		return fmt.Errorf("the kubeconfig (%s) sets no current context: pass --context (one of %s), or choose one with `kubectl config use-context NAME`", o.sources(), contextNames(raw.Contexts))
	case clientcmdapi.IsConfigEmpty(&raw):
		// The loader uses the pod's service account then; outside a pod
		// it would talk to localhost:8080.
		if _, err := rest.InClusterConfig(); err != nil {
			return fmt.Errorf("no cluster to talk to: %s, and this is not a pod with a service account (in-cluster configuration: %w): pass --kubeconfig FILE or set $KUBECONFIG (`lockstep dev up` writes %s)", o.sources(), err, devKubeconfig)
		}
	}
	return nil
}

// sources says where the kubeconfig was looked for, as the loader looks:
// --kubeconfig, else $KUBECONFIG's files, else ~/.kube/config.
func (o *Options) sources() string {
	if p := *o.flags.KubeConfig; p != "" {
		return "--kubeconfig " + p
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		for _, f := range strings.Split(env, string(os.PathListSeparator)) {
			if _, err := os.Stat(f); f != "" && err == nil {
				return "$KUBECONFIG=" + env
			}
		}
		return fmt.Sprintf("$KUBECONFIG=%s names no existing file", env)
	}
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err != nil {
		return "$KUBECONFIG is unset and " + clientcmd.RecommendedHomeFile + " does not exist"
	}
	return clientcmd.RecommendedHomeFile
}

func contextNames(contexts map[string]*clientcmdapi.Context) string {
	names := make([]string, 0, len(contexts))
	for n := range contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
