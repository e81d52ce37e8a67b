package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/config"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
)

// kinds maps the kinds Lockstep's manifests use to their resources; the set
// is closed, so no discovery round trip is needed.
var kinds = map[schema.GroupVersionKind]struct {
	resource   string
	namespaced bool
}{
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: {"customresourcedefinitions", false},
	{Version: "v1", Kind: "Namespace"}:                                               {"namespaces", false},
	{Version: "v1", Kind: "ServiceAccount"}:                                          {"serviceaccounts", true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:         {"clusterroles", false},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:  {"clusterrolebindings", false},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                {"roles", true},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:         {"rolebindings", true},
}

// InstallLockstep applies Lockstep's CRDs and RBAC with server-side apply
// and waits until the CRDs are served.
func InstallLockstep(ctx context.Context, dyn dynamic.Interface, client kubernetes.Interface) error {
	manifests, err := config.Manifests()
	if err != nil {
		return err
	}
	for _, m := range manifests {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(m), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := apply(ctx, dyn, &u); err != nil {
				return err
			}
		}
	}
	return crdsServed(ctx, client)
}

func apply(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured) error {
	k, ok := kinds[u.GroupVersionKind()]
	if !ok {
		return fmt.Errorf("manifest kind %s is not installable by dev up", u.GroupVersionKind())
	}
	gvr := u.GroupVersionKind().GroupVersion().WithResource(k.resource)
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if k.namespaced {
		ri = dyn.Resource(gvr).Namespace(u.GetNamespace())
	}
	_, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "lockstep-dev", Force: true})
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

func crdsServed(_ context.Context, client kubernetes.Interface) error {
	for _, r := range []string{"podgroups", "workloads"} {
		ok, err := apidiscovery.Serves(client.Discovery(), "scheduling.lockstep.dev/v1beta1", r)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("CRD %s not served yet", r)
		}
	}
	return nil
}

// Where Lockstep's components live in the local control plane, as in the
// Helm chart's default install.
const (
	LockstepNamespace = "lockstep-system"
	WebhookSecret     = "lockstep-webhook-tls"
)
