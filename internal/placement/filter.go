package placement

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// staticFilter checks what does not change within a cycle: schedulability,
// node name, node selector and required affinity, taints, the node features
// the pod requires (features, from requiredFeatures). A node reserved for
// the unit decided (reservedFor, its v1beta1.ReservedForTaint value) is open
// to it as if the taint were tolerated. It returns "" when the node passes,
// else the reason.
func staticFilter(logger klog.Logger, pod *corev1.Pod, aff nodeaffinity.RequiredNodeAffinity, features ndf.FeatureSet, reservedFor string, node *corev1.Node) (string, error) {
	if node.Spec.Unschedulable && !toleratesUnschedulable(logger, pod) {
		return ReasonUnschedulable, nil
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return ReasonNodeName, nil
	}
	ok, err := aff.Match(node)
	if err != nil {
		return "", fmt.Errorf("pod %s: invalid node affinity: %w", klog.KObj(pod), err)
	}
	if !ok {
		return ReasonAffinity, nil
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		if t.Key == v1beta1.ReservedForTaint && reservedFor != "" && t.Value == reservedFor {
			return false
		}
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	if untolerated {
		return fmt.Sprintf("%s{%s: %s}", reasonTaintPrefix, taint.Key, taint.Value), nil
	}
	if !features.IsEmpty() {
		ok, err := features.IsSubset(ndf.DefaultFramework.TryMap(node.Status.DeclaredFeatures))
		if err != nil {
			return "", fmt.Errorf("pod %s: node features: %w", klog.KObj(pod), err)
		}
		if !ok {
			return ReasonDeclaredFeatures, nil
		}
	}
	return "", nil
}

// featureVersion is the Kubernetes version whose node features pods are
// judged by: kube-scheduler 1.37's (features that every 1.37 node has need
// no declaration).
var featureVersion = version.MustParse("1.37.2")

// requiredFeatures are the node features a pod needs (kube-scheduler's
// NodeDeclaredFeatures, GA in 1.37, through the same inference from
// k8s.io/component-helpers): e.g. a container restart rule that restarts
// every container needs nodes that declare RestartAllContainersOnContainerExits.
func requiredFeatures(pod *corev1.Pod, f features.Features) (ndf.FeatureSet, error) {
	if !f.NodeDeclaredFeatures {
		return ndf.FeatureSet{}, nil
	}
	return ndf.DefaultFramework.InferForPodScheduling(&ndf.PodInfo{Spec: &pod.Spec}, featureVersion)
}

func toleratesUnschedulable(logger klog.Logger, pod *corev1.Pod) bool {
	t := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	return corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &t, true)
}

// fits checks the group's requests and host ports against what is left on
// the node; it returns "" or the first reason.
func (g *group) fits(snap *snapshot.Snapshot, ni *snapshot.NodeInfo) string {
	name, port := g.lacks(snap, ni)
	switch {
	case name != "":
		return fmt.Sprintf(reasonInsufficientFmt, name)
	case port:
		return ReasonPorts
	}
	return ""
}

// lacks is fits without the words: the first resource the node has too
// little left of ("" if none), else whether a host port is taken. Extended
// resources the node gets from DRA are left to the allocator
// (g.extendedClaim), as kube-scheduler's NodeResourcesFit leaves them to
// DynamicResources.
func (g *group) lacks(snap *snapshot.Snapshot, ni *snapshot.NodeInfo) (corev1.ResourceName, bool) {
	for _, name := range snapshot.Insufficient(ni.Allocatable, ni.Requested, g.req) {
		if slices.Contains(g.dra, name) && snap.DelegatedToDRA(ni, name) {
			continue
		}
		return name, false
	}
	for _, p := range g.ports {
		if ni.PortConflict(p) {
			return "", true
		}
	}
	return "", false
}

// extendedClaim is the claim for the member's extended resources that node
// ni gets from DRA (no device plugin there advertises them), or nil.
func (g *group) extendedClaim(snap *snapshot.Snapshot, m Member, ni *snapshot.NodeInfo) *dra.ExtendedClaim {
	var names []corev1.ResourceName
	for _, name := range g.dra {
		if snap.DelegatedToDRA(ni, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return dra.NewExtendedClaim(m.Pod, names, snap.ExtendedClass)
}

// extendedClasses are the DeviceClasses serving the group's extended resources.
func (g *group) extendedClasses(snap *snapshot.Snapshot) []string {
	var out []string
	for _, name := range g.dra {
		if c := snap.ExtendedClass(name); c != nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// draResources are the extended resources in req that a DeviceClass serves.
func draResources(snap *snapshot.Snapshot, req snapshot.Resources) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, v := range req.Scalar {
		if v > 0 && snap.ExtendedClass(name) != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
