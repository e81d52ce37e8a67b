package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// claimChecks warns about claims that would keep a pod pending: a
// DeviceClass that does not exist or that no device matches, and a claim
// shared by more pods than one ResourceClaim can be reserved for.
type claimChecks struct {
	reads
	Devices *deviceIndex
}

// claimSource is a claim named directly or through a template.
type claimSource struct {
	name, template *string
}

// claimWarnings warns about the DeviceClasses one claim asks for.
func (c *claimChecks) claimWarnings(ctx context.Context, ns, name string, src claimSource) admission.Warnings {
	spec, err := c.claimSpec(ctx, ns, src)
	if err != nil || spec == nil {
		return nil
	}
	var warnings admission.Warnings
	what := fmt.Sprintf("claim %q", name)
	for _, class := range dra.Classes(spec) {
		switch n, exists := c.Devices.count(class); {
		case !exists:
			warnings = append(warnings, fmt.Sprintf("%s: DeviceClass %q does not exist: the pod cannot be scheduled until it does (check the name, or install the DRA driver that provides it)", what, class))
		case n == 0:
			warnings = append(warnings, fmt.Sprintf("%s: no ResourceSlice in the cluster has a device of DeviceClass %q: the pod cannot be scheduled until a driver publishes one", what, class))
		}
	}
	return warnings
}

func (c *claimChecks) claimSpec(ctx context.Context, ns string, src claimSource) (*resourcev1.ResourceClaimSpec, error) {
	switch {
	case src.template != nil:
		t := &resourcev1.ResourceClaimTemplate{}
		if err := c.Cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: *src.template}, t); err != nil {
			return nil, err
		}
		return &t.Spec.Spec, nil
	case src.name != nil:
		cl := &resourcev1.ResourceClaim{}
		if err := c.Cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: *src.name}, cl); err != nil {
			return nil, err
		}
		return &cl.Spec, nil
	}
	return nil, nil
}

// sharedClaimWarnings warns when the pod shares a named ResourceClaim with
// so many members of its gang that not all can reserve it: resource.k8s.io/v1
// allows 256 reservations per claim, so members beyond that stay pending,
// and a gang whose minCount is higher can never be placed (the scheduler's
// condition says the same).
func (c *claimChecks) sharedClaimWarnings(ctx context.Context, ns string, pod *corev1.Pod, pg *lockv1.PodGroup) admission.Warnings {
	var named []string
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			named = append(named, *pc.ResourceClaimName)
		}
	}
	if len(named) == 0 {
		return nil
	}
	members, err := c.members(ctx, ns, pg.Name)
	if err != nil {
		return nil
	}
	var warnings admission.Warnings
	for _, claim := range named {
		users := 1 // this pod
		for _, m := range members {
			if m.UID == pod.UID || podgroup.Terminal(m) {
				continue
			}
			for _, pc := range m.Spec.ResourceClaims {
				if name, ok := snapshot.ClaimName(m, pc); ok && name == claim {
					users++
					break
				}
			}
		}
		max := resourcev1.ResourceClaimReservedForMaxSize
		switch {
		case users > max && podgroup.MinCount(pg) > max:
			warnings = append(warnings, fmt.Sprintf("claim %q is shared by %d members of PodGroup %s, whose minCount %d is more than the %d pods one ResourceClaim can be reserved for: the gang can never be placed; give each pod its own claim (a ResourceClaimTemplate) or share one claim among at most %d pods",
				claim, users, pg.Name, podgroup.MinCount(pg), max, max))
		case users > max:
			warnings = append(warnings, fmt.Sprintf("claim %q is shared by %d members of PodGroup %s: one ResourceClaim can be reserved for at most %d pods, so %d of them stay pending", claim, users, pg.Name, max, users-max))
		}
	}
	return warnings
}

// driverPathWarnings warns about a pod template whose required node
// selection (node selector, required node affinity) reaches only nodes on
// which no device of a DeviceClass its claims ask for is published — an
// EKS Auto Mode or device-plugin pool asked for a DRA class: its pods would
// wait for ever. It names the pools reached and those that do publish the
// class, from the cached node labels and device inventory only.
func (c *claimChecks) driverPathWarnings(ctx context.Context, ns string, path *field.Path, spec *corev1.PodSpec, nodes *nodeLabels) admission.Warnings {
	if nodes == nil || len(spec.ResourceClaims) == 0 {
		return nil
	}
	reached := nodes.reachedBy(spec)
	if len(reached) == 0 {
		return nil // every node, or none
	}
	var out admission.Warnings
	for _, pc := range spec.ResourceClaims {
		cs, err := c.claimSpec(ctx, ns, claimSource{pc.ResourceClaimName, pc.ResourceClaimTemplateName})
		if err != nil || cs == nil {
			continue
		}
		for _, class := range dra.Classes(cs) {
			on, anywhere, known := c.Devices.onNodes(class)
			if !known || anywhere || len(on) == 0 {
				continue // unknown, not node-bound, or none at all (claimWarnings says so)
			}
			hit := false
			for name := range reached {
				hit = hit || on[name]
			}
			if hit {
				continue
			}
			publishing := nodes.matching(func(name string, _ map[string]string) bool { return on[name] })
			out = append(out, fmt.Sprintf("%s: its node selection reaches %d nodes (pools %s), none of which publishes a device of DeviceClass %q (pools that do: %s), so its pods wait for ever — an EKS Auto Mode or device-plugin pool offers no DRA device; select a pool whose DRA driver publishes the class, or ask for the device plugin's extended resource instead (`lockstep preflight` lists each pool's supply)",
				path.Child("spec", "nodeSelector"), len(reached), poolsOf(reached), class, poolsOf(publishing)))
		}
	}
	return out
}

// extendedPathWarnings is the reverse of driverPathWarnings: a pod template
// asking for an extended resource (a device plugin's nvidia.com/gpu) whose
// required node selection reaches only nodes that advertise none of it and
// on which no DeviceClass serving that name (extendedResourceName) publishes
// a device — a pool whose GPUs a DRA driver publishes, asked for the device
// plugin's resource. It names the pools reached and those that do offer the
// resource; a resource nothing offers anywhere is left to the autoscaler.
func (c *claimChecks) extendedPathWarnings(path *field.Path, spec *corev1.PodSpec, nodes *nodeLabels) admission.Warnings {
	if nodes == nil {
		return nil
	}
	wanted := extendedRequests(path, spec)
	if len(wanted) == 0 {
		return nil
	}
	reached := nodes.reachedBy(spec)
	if len(reached) == 0 {
		return nil // every node, or none
	}
	var out admission.Warnings
	for _, w := range wanted {
		offering := nodes.advertising(w.name)
		served := false
		if c != nil && c.Devices != nil {
			classes, known := c.Devices.serving(w.name)
			served = !known // an unreadable inventory warns about nothing
			for _, class := range classes {
				on, anywhere, _ := c.Devices.onNodes(class)
				served = served || anywhere
				for node, labels := range nodes.matching(func(name string, _ map[string]string) bool { return on[name] }) {
					offering[node] = labels
				}
			}
		}
		hit := served
		for name := range reached {
			_, ok := offering[name]
			hit = hit || ok
		}
		if hit || len(offering) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: asks for %q, but its node selection reaches %d nodes (pools %s), none of which advertises it or publishes a device of a DeviceClass that serves it (pools that do: %s), so its pods wait for ever — a pool whose devices a DRA driver publishes advertises no device plugin resource; ask for a ResourceClaim of the driver's DeviceClass, or select a pool running the device plugin (`lockstep preflight` lists each pool's supply)",
			w.path, w.name, len(reached), poolsOf(reached), poolsOf(offering)))
	}
	return out
}

// extendedRequest is one extended resource a pod template asks for and the
// first field that asks.
type extendedRequest struct {
	name corev1.ResourceName
	path *field.Path
}

// extendedRequests are the extended resources the containers of spec ask
// for (requests or limits), in the order they first appear.
func extendedRequests(path *field.Path, spec *corev1.PodSpec) []extendedRequest {
	var out []extendedRequest
	seen := map[corev1.ResourceName]bool{}
	add := func(p *field.Path, list corev1.ResourceList) {
		names := make([]string, 0, len(list))
		for name := range list {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			q := list[name]
			if v1helper.IsExtendedResourceName(name) && !seen[name] && !q.IsZero() {
				seen[name] = true
				out = append(out, extendedRequest{name: name, path: p})
			}
		}
	}
	for _, set := range []struct {
		field      string
		containers []corev1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range set.containers {
			p := path.Child("spec", set.field).Index(i).Child("resources")
			add(p.Child("requests"), set.containers[i].Resources.Requests)
			add(p.Child("limits"), set.containers[i].Resources.Limits)
		}
	}
	return out
}

// poolsOf names the node pools of nodes, sorted: their Karpenter NodePool,
// EKS managed node group or eksctl node group, "(unlabelled)" otherwise.
func poolsOf(nodes map[string]map[string]string) string {
	seen := map[string]bool{}
	for _, labels := range nodes {
		pool := "(unlabelled)"
		for _, key := range []string{"karpenter.sh/nodepool", "eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name"} {
			if v := labels[key]; v != "" {
				pool = v
				break
			}
		}
		seen[pool] = true
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
