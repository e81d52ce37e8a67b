package preflight

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Node labels that tell how a node on Amazon EKS is supplied.
const (
	labelComputeType = "eks.amazonaws.com/compute-type"
	labelNodegroup   = "eks.amazonaws.com/nodegroup"
	labelNodePool    = "karpenter.sh/nodepool"
)

// Supply models.
const (
	SupplyAutoMode         = "EKS Auto Mode"
	SupplyKarpenterStatic  = "Karpenter (static capacity)"
	SupplyKarpenterDynamic = "Karpenter (dynamic capacity)"
	SupplyManaged          = "EKS managed node group"
	SupplySelfManaged      = "self-managed"
)

// pools groups nodes by supply model and applies seed 000 §8.2-8.3:
//
//	DRA driver:    Karpenter (static capacity only), managed node group, self-managed — Kubernetes ≥ 1.34
//	device plugin: Auto Mode, Karpenter, managed node group, self-managed
//
// staticNodePools names the Karpenter NodePools with spec.replicas set
// (nil when their API is not readable: such pools are reported dynamic).
func pools(nodes []corev1.Node, minor int, eks bool, staticNodePools map[string]bool) []Pool {
	count := map[supply]int{}
	for i := range nodes {
		k := supplyOf(&nodes[i], staticNodePools)
		if !eks && k.model == SupplySelfManaged {
			k.name = "(all nodes)"
		}
		count[k]++
	}
	var out []Pool
	for k, n := range count {
		rec, why := recommend(k.model, minor)
		out = append(out, Pool{Name: k.name, SupplyModel: k.model, Nodes: n, Recommendation: rec, Why: why})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].SupplyModel != out[j].SupplyModel {
			return out[i].SupplyModel < out[j].SupplyModel
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// supply is how one node is supplied: its model and the pool (node group,
// NodePool) it belongs to.
type supply struct{ model, name string }

// supplyOf reads a node's supply model from its labels; a Karpenter node
// is static when its NodePool is in staticNodePools.
func supplyOf(n *corev1.Node, staticNodePools map[string]bool) supply {
	l := n.Labels
	switch {
	case l[labelComputeType] == "auto":
		return supply{SupplyAutoMode, l[labelNodePool]}
	case l[labelNodePool] != "" && staticNodePools[l[labelNodePool]]:
		return supply{SupplyKarpenterStatic, l[labelNodePool]}
	case l[labelNodePool] != "":
		return supply{SupplyKarpenterDynamic, l[labelNodePool]}
	case l[labelNodegroup] != "":
		return supply{SupplyManaged, l[labelNodegroup]}
	}
	return supply{SupplySelfManaged, "(unlabelled)"}
}

func recommend(model string, minor int) (string, string) {
	const plugin, driver = "device plugin", "DRA driver"
	old := minor > 0 && minor < 34
	switch model {
	case SupplyAutoMode:
		return plugin, "DRA is not compatible with EKS Auto Mode, static capacity included"
	case SupplyKarpenterDynamic:
		return plugin, "DRA drivers need static capacity on Karpenter (spec.replicas on the NodePool; alpha StaticCapacity gate in self-managed Karpenter ≥ 1.8)"
	case SupplyKarpenterStatic:
		if old {
			return plugin, fmt.Sprintf("DRA drivers need Kubernetes 1.34 or later; this cluster is 1.%d", minor)
		}
		return driver, "static-capacity NodePools may use DRA drivers (GPU–NIC alignment through matchAttribute); replicas can never be removed and the pool is not consolidated"
	default:
		if old {
			return plugin, fmt.Sprintf("DRA drivers need Kubernetes 1.34 or later; this cluster is 1.%d", minor)
		}
		return driver, "DRA drivers are supported here (Kubernetes ≥ 1.34) and give topology alignment; the device plugin remains fully supported"
	}
}
