package provision

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Karpenter's API, as Lockstep reads and writes it (karpenter.sh/v1).
var (
	NodePoolResource  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaimResource = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
)

// Karpenter's labels and annotations.
const (
	NodePoolLabel     = "karpenter.sh/nodepool"
	CapacityTypeLabel = "karpenter.sh/capacity-type"
	// DoNotDisruptAnnotation on a pod blocks the voluntary disruption
	// (consolidation, drift) of its node while it runs; on a NodeClaim or
	// node, of that node.
	DoNotDisruptAnnotation   = "karpenter.sh/do-not-disrupt"
	NodePoolHashAnnotation   = "karpenter.sh/nodepool-hash"
	NodePoolHashVersionAnnot = "karpenter.sh/nodepool-hash-version"
)

// NodePool is what Lockstep reads of a Karpenter NodePool: what its nodes
// are made of and how many more it may make.
type NodePool struct {
	Name string
	UID  types.UID
	// Weight orders NodePools as Karpenter does: higher first.
	Weight int32
	// Labels, Requirements, Taints, StartupTaints and NodeClassRef are its
	// template's; Requirements bound the instance types, zones and
	// capacity types its nodes may have.
	Labels        map[string]string
	Requirements  []corev1.NodeSelectorRequirement
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	NodeClassRef  map[string]any
	// ExpireAfter and TerminationGracePeriod are copied to the NodeClaims
	// made for it, as Karpenter copies them.
	ExpireAfter, TerminationGracePeriod any
	// Limits cap the resources of all its nodes; Used is what its nodes
	// have now (status.resources).
	Limits, Used corev1.ResourceList
	// Static: spec.replicas is set (static capacity): Karpenter keeps that
	// many nodes and makes no NodeClaim for pods; Lockstep does not either.
	Static bool
	// Annotations are the NodePool's hash annotations, copied to its
	// NodeClaims so that Karpenter's drift detection sees them as its own.
	Annotations map[string]string
}

// nodePoolSpec is the part of karpenter.sh/v1 NodePool read here.
type nodePoolSpec struct {
	Spec struct {
		Weight   *int32 `json:"weight"`
		Replicas *int64 `json:"replicas"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Requirements           []corev1.NodeSelectorRequirement `json:"requirements"`
				Taints                 []corev1.Taint                   `json:"taints"`
				StartupTaints          []corev1.Taint                   `json:"startupTaints"`
				NodeClassRef           map[string]any                   `json:"nodeClassRef"`
				ExpireAfter            any                              `json:"expireAfter"`
				TerminationGracePeriod any                              `json:"terminationGracePeriod"`
			} `json:"spec"`
		} `json:"template"`
		Limits corev1.ResourceList `json:"limits"`
	} `json:"spec"`
	Status struct {
		Resources corev1.ResourceList `json:"resources"`
	} `json:"status"`
}

// ReadNodePool reads a NodePool object.
func ReadNodePool(u *unstructured.Unstructured) (*NodePool, error) {
	var s nodePoolSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
		return nil, fmt.Errorf("NodePool %s: %w", u.GetName(), err)
	}
	t := s.Spec.Template
	np := &NodePool{
		Name: u.GetName(), UID: u.GetUID(), Labels: t.Metadata.Labels, Requirements: t.Spec.Requirements,
		Taints: t.Spec.Taints, StartupTaints: t.Spec.StartupTaints, NodeClassRef: t.Spec.NodeClassRef,
		ExpireAfter: t.Spec.ExpireAfter, TerminationGracePeriod: t.Spec.TerminationGracePeriod,
		Limits: s.Spec.Limits, Used: s.Status.Resources, Static: s.Spec.Replicas != nil,
	}
	if s.Spec.Weight != nil {
		np.Weight = *s.Spec.Weight
	}
	for _, k := range []string{NodePoolHashAnnotation, NodePoolHashVersionAnnot} {
		if v, ok := u.GetAnnotations()[k]; ok {
			if np.Annotations == nil {
				np.Annotations = map[string]string{}
			}
			np.Annotations[k] = v
		}
	}
	return np, nil
}

// allows reports whether the NodePool's requirements admit a node with
// these labels, as node affinity matches them.
func (np *NodePool) allows(labels map[string]string) bool {
	if len(np.Requirements) == 0 {
		return true
	}
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: np.Requirements}}})
	if err != nil {
		return false
	}
	return sel.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}})
}

// Headroom is what the NodePool's limits leave for more nodes; nil when
// it has no limits.
func (np *NodePool) Headroom() corev1.ResourceList {
	if len(np.Limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for name, limit := range np.Limits {
		left := limit.DeepCopy()
		if used, ok := np.Used[name]; ok {
			left.Sub(used)
		}
		out[name] = left
	}
	return out
}

// exceeds names the first limit n nodes of capacity c would pass ("" when
// none): "cpu: 3 nodes need 288, the limit leaves 200 of 1000".
func (np *NodePool) exceeds(c corev1.ResourceList, n int) string {
	head := np.Headroom()
	names := make([]string, 0, len(head))
	for name := range head {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		per, ok := c[corev1.ResourceName(name)]
		if !ok {
			continue
		}
		need := per.DeepCopy()
		need.Mul(int64(n))
		left := head[corev1.ResourceName(name)]
		if need.Cmp(left) > 0 {
			limit, rest := np.Limits[corev1.ResourceName(name)], nonNegative(left)
			return fmt.Sprintf("%s: %d nodes need %s, its limit leaves %s of %s", name, n, need.String(), rest.String(), limit.String())
		}
	}
	return ""
}

func nonNegative(q resource.Quantity) resource.Quantity {
	if q.Sign() < 0 {
		return resource.Quantity{}
	}
	return q
}

// describe is "gpu-8x in zone-a (on-demand)".
func describe(o Offering) string {
	var b strings.Builder
	b.WriteString(o.InstanceType.Name)
	if o.Zone != "" {
		b.WriteString(" in " + o.Zone)
	}
	if o.CapacityType != "" {
		b.WriteString(" (" + o.CapacityType + ")")
	}
	return b.String()
}
