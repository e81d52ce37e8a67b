package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
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
		objs, err := decodeManifest(m)
		if err != nil {
			return err
		}
		for _, u := range objs {
			if err := apply(ctx, dyn, u); err != nil {
				return err
			}
		}
	}
	return crdsServed(ctx, client)
}

// decodeManifest is the objects of a YAML or JSON manifest, documents
// without content left out.
func decodeManifest(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// InstallCRDs applies the CustomResourceDefinitions of manifests — files,
// or directories whose .yaml, .yml and .json files are read in name order,
// as kubectl apply -f reads them — with server-side apply, and waits until
// every one is established (at most crdWait). Anything in them that is not
// a CRD is an error, and then nothing is applied.
func InstallCRDs(ctx context.Context, dyn dynamic.Interface, manifests ...string) error {
	var crds []*unstructured.Unstructured
	for _, m := range manifests {
		files, err := manifestFiles(m)
		if err != nil {
			return err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			objs, err := decodeManifest(b)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, u := range objs {
				if u.GroupVersionKind() != crdKind {
					return fmt.Errorf("%s: %s %s is not a CustomResourceDefinition", f, u.GetKind(), u.GetName())
				}
			}
			crds = append(crds, objs...)
		}
	}
	names := make([]string, len(crds))
	for i, u := range crds {
		if err := apply(ctx, dyn, u); err != nil {
			return err
		}
		names[i] = u.GetName()
	}
	return crdsEstablished(ctx, dyn, names)
}

var crdKind = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// crdWait bounds how long InstallCRDs waits for its CRDs to be established.
const crdWait = time.Minute

// manifestFiles is path, or the manifests of the directory path.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				out = append(out, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no manifests (.yaml, .yml, .json)", path)
	}
	return out, nil
}

// crdsEstablished waits until every named CRD has condition Established.
// An error reading one (the API server busy, the CRD not yet visible) is
// retried until the wait ends, and then named.
func crdsEstablished(ctx context.Context, dyn dynamic.Interface, names []string) error {
	crds := dyn.Resource(crdKind.GroupVersion().WithResource("customresourcedefinitions"))
	pending := slices.Clone(names)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdWait, true, func(ctx context.Context) (bool, error) {
		var left []string
		for _, name := range pending {
			u, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err
			}
			if err != nil || !established(u) {
				left = append(left, name)
			}
		}
		pending = left
		return len(pending) == 0, nil
	})
	if err != nil {
		why := "not established"
		if last != nil {
			why += " (last error reading them: " + last.Error() + ")"
		}
		return fmt.Errorf("CRDs %s within %s: %s: %w", why, crdWait, strings.Join(pending, ", "), err)
	}
	return nil
}

// established reports whether a CRD's condition Established is True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
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
