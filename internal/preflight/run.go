package preflight

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/config"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
)

// Options tune the checks that write.
type Options struct {
	// ProbeNamespace is where the Job probe runs; default "default".
	ProbeNamespace string
	// ProbeTimeout bounds the wait for kube-controller-manager to act on
	// the probe Job; default 30s.
	ProbeTimeout time.Duration
}

func (o *Options) complete() {
	if o.ProbeNamespace == "" {
		o.ProbeNamespace = metav1.NamespaceDefault
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 30 * time.Second
	}
}

// Run reads the cluster and builds the report. It writes nothing lasting:
// the DRA feature probes are server-side dry runs, and the Job probe, which
// creates a suspended Job where the API server keeps Job spec.scheduling,
// deletes it before returning.
func Run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Report, error) {
	opts.complete()
	r := &Report{}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	r.KubernetesVersion = v.GitVersion
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if minor > 0 && minor < 34 {
		r.add("kubernetes version", Fail, v.GitVersion, "Lockstep and DRA drivers need Kubernetes 1.34 or later")
	} else {
		r.add("kubernetes version", OK, v.GitVersion, "")
	}

	dra := served(client, "resource.k8s.io/v1", "resourceslices")
	if dra {
		r.add("resource.k8s.io/v1 (DRA)", OK, "served", "")
	} else {
		r.add("resource.k8s.io/v1 (DRA)", Fail, "not served", "DRA is GA from Kubernetes 1.34; upgrade the control plane")
	}
	if served(client, "scheduling.k8s.io/v1beta1", "podgroups") {
		r.add("scheduling.k8s.io/v1beta1 (in-tree gang API)", Info, "served (GenericWorkload is on)", "")
	} else {
		r.add("scheduling.k8s.io/v1beta1 (in-tree gang API)", Info, "not served: the in-tree gang is off (always so on EKS)", "Lockstep's scheduling.lockstep.dev/v1beta1 needs no gate")
	}
	r.checkUpgrade(minor, liveUpgradeView(ctx, client, dyn))
	r.Checks = append(r.Checks, checkJobField(ctx, client, dyn, opts.ProbeNamespace, opts.ProbeTimeout))
	r.checkLockstep(ctx, client)

	var sliceList []resourcev1.ResourceSlice
	if dra {
		slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing ResourceSlices: %w", err)
		}
		sliceList = slices.Items
		r.DRAFeatures = draFeatures(ctx, client)
		r.Checks = append(r.Checks, featureSummary(r.DRAFeatures))
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	classes, _ := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	var driverNodes map[string]map[string]bool
	r.Drivers, driverNodes = drivers(sliceList)
	r.Overlaps = overlaps(nodes.Items, driverNodes, classResources(classes))
	static := staticNodePools(ctx, dyn)
	r.Pools = pools(nodes.Items, minor, onEKS(nodes.Items), static)
	views := inventory(nodes.Items, sliceList, static)
	r.Checks = append(r.Checks, checkDRASupply(views, static != nil), checkAlignment(views), checkEFA(views),
		checkBottlerocket(views), checkSpot(views))
	r.checkTopology(ctx, dyn, nodes.Items)
	return r, nil
}

// served swallows discovery errors: an API the client cannot discover is
// reported as not served.
func served(client kubernetes.Interface, gv, resource string) bool {
	ok, _ := apidiscovery.Serves(client.Discovery(), gv, resource)
	return ok
}

// checkCRDs checks that the API server serves every kind, at every
// version, of the CRDs this release installs (config.Kinds): an upgrade
// whose new CRDs were not applied (`helm upgrade` never changes crds/)
// leaves a kind or a version missing.
func (r *Report) checkCRDs(client kubernetes.Interface) {
	kinds, err := config.Kinds()
	if err != nil {
		r.add("Lockstep CRDs", Fail, err.Error(), "")
		return
	}
	var have, missing []string
	for _, k := range kinds {
		for _, v := range k.Versions {
			name := k.Kind + " " + k.Group + "/" + v
			if served(client, k.Group+"/"+v, k.Resource) {
				have = append(have, k.Kind)
			} else {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) > 0 {
		r.add("Lockstep CRDs", Fail, "not served: "+strings.Join(missing, ", "),
			"apply this release's CRDs (charts/lockstep/crds, or config/crd): `helm upgrade` does not; kubectl apply --server-side -f charts/lockstep/crds")
		return
	}
	r.add("Lockstep CRDs", OK, strings.Join(have, ", ")+" served", "")
}

// checkLockstep looks for Lockstep's CRDs, webhooks and live components.
func (r *Report) checkLockstep(ctx context.Context, client kubernetes.Interface) {
	r.checkCRDs(client)
	m, errM := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	v, errV := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	switch {
	case errM != nil || errV != nil:
		r.add("Lockstep webhooks", Fail, "webhook configurations missing", "run `lockstep webhook` (it creates them and injects its caBundle)")
	case len(m.Webhooks) == 0 || len(m.Webhooks[0].ClientConfig.CABundle) == 0 || len(v.Webhooks) == 0 || len(v.Webhooks[0].ClientConfig.CABundle) == 0:
		r.add("Lockstep webhooks", Fail, "configured without a caBundle", "restart `lockstep webhook` so it injects its certificate authority")
	default:
		r.add("Lockstep webhooks", OK, fmt.Sprintf("%d mutating, %d validating", len(m.Webhooks), len(v.Webhooks)), "")
	}
	for _, c := range []struct{ name, lease, fix string }{
		{"Lockstep scheduler", "lockstep-scheduler", "run `lockstep scheduler`"},
		{"Lockstep controllers", "lockstep-controllers", "run `lockstep controllers`"},
	} {
		status, detail := leaseHealth(ctx, client, c.lease)
		fix := ""
		if status != OK {
			fix = c.fix
		}
		r.add(c.name, status, detail, fix)
	}
}

// leaseHealth: a component is healthy when its leader Lease was renewed
// within two lease durations.
func leaseHealth(ctx context.Context, client kubernetes.Interface, name string) (Status, string) {
	l, err := client.CoordinationV1().Leases("lockstep-system").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Fail, "no leader (Lease lockstep-system/" + name + " not found)"
	}
	if err != nil {
		return Warn, err.Error()
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return Fail, "Lease never renewed"
	}
	age := time.Since(l.Spec.RenewTime.Time)
	if age > 2*time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
		return Fail, fmt.Sprintf("leader %s last renewed %s ago", ptr.Deref(l.Spec.HolderIdentity, "?"), age.Round(time.Second))
	}
	return OK, "leader " + ptr.Deref(l.Spec.HolderIdentity, "?")
}

var driverSelector = regexp.MustCompile(`device\.driver\s*==\s*"([^"]+)"`)

// classResources maps a driver to the extended resources its DeviceClasses
// stand in for (DRAExtendedResource: spec.extendedResourceName), reading the
// driver from the classes' `device.driver == "…"` selectors.
func classResources(classes *resourcev1.DeviceClassList) map[string][]string {
	out := map[string][]string{}
	if classes == nil {
		return out
	}
	for _, c := range classes.Items {
		if c.Spec.ExtendedResourceName == nil {
			continue
		}
		for _, sel := range c.Spec.Selectors {
			if sel.CEL == nil {
				continue
			}
			for _, m := range driverSelector.FindAllStringSubmatch(sel.CEL.Expression, -1) {
				out[m[1]] = append(out[m[1]], *c.Spec.ExtendedResourceName)
			}
		}
	}
	return out
}

func onEKS(nodes []corev1.Node) bool {
	for _, n := range nodes {
		for _, l := range []string{labelComputeType, labelNodegroup, labelNodePool} {
			if _, ok := n.Labels[l]; ok {
				return true
			}
		}
	}
	return false
}

// staticNodePools reads Karpenter NodePools where their API is served and
// returns those with spec.replicas (static capacity).
func staticNodePools(ctx context.Context, dyn dynamic.Interface) map[string]bool {
	if dyn == nil {
		return nil
	}
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, np := range list.Items {
		if _, found, _ := unstructured.NestedInt64(np.Object, "spec", "replicas"); found {
			out[np.GetName()] = true
		}
	}
	return out
}
