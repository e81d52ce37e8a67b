package preflight

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Check names of the node checks.
const (
	CheckSpot            = "Spot capacity"
	CheckEFA             = "EFA on EFA-capable instances"
	CheckDRASupply       = "DRA drivers where the supply model allows them"
	CheckAlignment       = "accelerator–EFA alignment"
	CheckBottlerocket    = "Bottlerocket NVIDIA device plugin"
	bottlerocketMinimum  = "1.63.0"
	labelEKSCapacityType = podgroup.LabelEKSCapacityType
	labelKarpenterCap    = podgroup.LabelKarpenterCapacityType
)

// efaInstanceTypes are the accelerated EC2 instance types with EFA, where a
// gang's collectives (NCCL, Neuron collectives) expect it. Other EFA-capable
// types (HPC, network-optimized) are not checked.
var efaInstanceTypes = setOf(
	"p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
	"p6-b200.48xlarge", "p6-b300.48xlarge", "p6e-gb200.36xlarge",
	"g4dn.8xlarge", "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.metal",
	"g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge",
	"g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.24xlarge", "g6.48xlarge",
	"g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge", "gr6.8xlarge",
	"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge", "dl1.24xlarge",
)

func setOf(items ...string) map[string]bool {
	out := make(map[string]bool, len(items))
	for _, i := range items {
		out[i] = true
	}
	return out
}

// isSpot reports whether a node is Spot capacity (managed node groups and
// Auto Mode label eks.amazonaws.com/capacityType, Karpenter karpenter.sh/capacity-type).
func isSpot(n *corev1.Node) bool { return podgroup.NodeCapacityType(n) == podgroup.Spot }

// keepsGangsOff reports whether a node has a taint that keeps gang pods
// which do not tolerate it away (NoSchedule or NoExecute) — not one keyed
// by an extended resource the node advertises (nvidia.com/gpu on a GPU
// pool): the ExtendedResourceToleration admission plugin (on in EKS) gives
// every pod that requests the resource a toleration for it, so a GPU gang
// lands on a Spot GPU pool tainted that way.
func keepsGangsOff(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if _, resource := n.Status.Capacity[corev1.ResourceName(t.Key)]; resource && v1helper.IsExtendedResourceName(corev1.ResourceName(t.Key)) {
			continue
		}
		return true
	}
	return false
}

// checkSpot warns when gangs can land on Spot capacity: an interruption
// takes one node, and Lockstep then restarts the whole gang (disruptionMode
// all). Spot nodes every pod must tolerate a taint to use are fine.
func checkSpot(nodes []nodeView) Check {
	var open, guarded []string
	for _, n := range nodes {
		if !isSpot(n.node) {
			continue
		}
		if keepsGangsOff(n.node) {
			guarded = append(guarded, n.name())
		} else {
			open = append(open, n.name())
		}
	}
	switch {
	case len(open) > 0:
		return Check{Name: CheckSpot, Status: Warn, Nodes: open,
			Detail: fmt.Sprintf("%s on which no taint keeps gang pods off (%s; a taint keyed by the node's extended resource, nvidia.com/gpu, is tolerated by every pod requesting it): a gang there restarts whole at each interruption; Lockstep places one there only if its %s (default %s) lists spot", count(len(open), "Spot node"), nodeList(open), lockv1.CapacityTypesAnnotation, podgroup.DefaultCapacityTypes),
			Fix:    "keep spot out of gangs' capacity types (the default); taint Spot pools with a key of their own (NoSchedule)"}
	case len(guarded) > 0:
		return Check{Name: CheckSpot, Status: OK, Detail: fmt.Sprintf("%s, all tainted: only pods that tolerate the taint land there", count(len(guarded), "Spot node"))}
	}
	return Check{Name: CheckSpot, Status: OK, Detail: "no Spot nodes"}
}

// checkEFA warns about EFA-capable nodes that publish no EFA interface in
// either form: collectives then fall back to TCP without an error.
func checkEFA(nodes []nodeView) Check {
	var missing []string
	capable := 0
	types := map[string]bool{}
	for _, n := range nodes {
		t := n.instanceType()
		if !efaInstanceTypes[t] {
			continue
		}
		capable++
		if !n.efaOnDRA() && !n.efaOnPlugin() {
			missing = append(missing, n.name())
			types[t] = true
		}
	}
	switch {
	case len(missing) > 0:
		return Check{Name: CheckEFA, Status: Warn, Nodes: missing,
			Detail: fmt.Sprintf("%s (%s) with neither %s nor EFA devices in ResourceSlices: NCCL and the Neuron collectives fall back to TCP sockets without an error", count(len(missing), strings.Join(sortedKeys(types), "/")+" node"), nodeList(missing), ResourceEFA),
			Fix:    fmt.Sprintf("install the EFA DRA driver (%s, DeviceClass %s) on DRA pools, or the EFA device plugin on device-plugin pools; neither the AL2023 nor the Bottlerocket AMI ships them", DriverEFA, ClassEFA)}
	case capable > 0:
		return Check{Name: CheckEFA, Status: OK, Detail: fmt.Sprintf("%s, each with its EFA interfaces advertised", count(capable, "EFA-capable node"))}
	}
	return Check{Name: CheckEFA, Status: OK, Detail: "no EFA-capable instance types (label node.kubernetes.io/instance-type)"}
}

// checkDRASupply fails when DRA drivers publish devices on nodes whose
// supply model does not support DRA (Auto Mode, dynamic Karpenter).
// nodePoolsRead is false when Karpenter NodePools could not be read, so
// static and dynamic capacity cannot be told apart.
func checkDRASupply(nodes []nodeView, nodePoolsRead bool) Check {
	var bad, unsure []string
	pools := map[string]bool{}
	for _, n := range nodes {
		if len(n.draDrivers()) == 0 {
			continue
		}
		switch {
		case n.supply.model == SupplyAutoMode:
			bad = append(bad, n.name())
			pools[n.supply.model+" "+n.supply.name] = true
		case n.supply.model == SupplyKarpenterDynamic && nodePoolsRead:
			bad = append(bad, n.name())
			pools[n.supply.model+" "+n.supply.name] = true
		case n.supply.model == SupplyKarpenterDynamic:
			unsure = append(unsure, n.name())
		}
	}
	switch {
	case len(bad) > 0:
		return Check{Name: CheckDRASupply, Status: Fail, Nodes: bad,
			Detail: fmt.Sprintf("DRA drivers publish devices on %s (%s) of %s, where DRA is not supported: Auto Mode is not compatible with DRA even with static capacity, and Karpenter cannot provision dynamic capacity for DRA claims", count(len(bad), "node"), nodeList(bad), strings.Join(sortedKeys(pools), ", ")),
			Fix:    "run the device plugin on these pools and the DRA driver only on managed node groups, self-managed nodes or Karpenter NodePools with static capacity (spec.replicas)"}
	case len(unsure) > 0:
		return Check{Name: CheckDRASupply, Status: Warn, Nodes: unsure,
			Detail: fmt.Sprintf("DRA drivers publish devices on %s (%s) whose NodePools could not be read: DRA is supported there only with static capacity (spec.replicas)", count(len(unsure), "Karpenter node"), nodeList(unsure)),
			Fix:    "run preflight with permission to list nodepools.karpenter.sh, or check that these NodePools set spec.replicas"}
	}
	return Check{Name: CheckDRASupply, Status: OK, Detail: "DRA drivers publish devices only on pools whose supply model supports DRA"}
}

// checkAlignment fails where accelerators and EFA interfaces are allocated
// by different mechanisms: a matchAttribute constraint can align a GPU (or
// Neuron device) with an EFA interface on one PCIe root only when both are
// DRA devices of one claim.
func checkAlignment(nodes []nodeView) Check {
	var split []string
	aligned, plugins := 0, 0
	for _, n := range nodes {
		accDRA, accPlugin := n.acceleratorOnDRA(), n.acceleratorOnPlugin()
		efaDRA, efaPlugin := n.efaOnDRA(), n.efaOnPlugin()
		switch {
		case accDRA && efaDRA:
			aligned++
		case accDRA && efaPlugin, accPlugin && efaDRA:
			split = append(split, n.name())
		case accPlugin && efaPlugin:
			plugins++
		}
	}
	if len(split) > 0 {
		return Check{Name: CheckAlignment, Status: Fail, Nodes: split,
			Detail: fmt.Sprintf("on %s (%s) accelerators and EFA interfaces are allocated by different mechanisms (one a DRA driver, the other a device plugin): nothing keeps a rank's EFA on its accelerator's PCIe root, so ranks run misaligned and collectives cross PCIe switches", count(len(split), "node"), nodeList(split)),
			Fix:    fmt.Sprintf("run DRA drivers on both sides (the EFA DRA driver %s beside the GPU or Neuron DRA driver) and remove the device plugin; request both in one claim with matchAttribute %s (docs/install.md)", DriverEFA, AttributePCIeRoot)}
	}
	detail := "no node has both accelerators and EFA"
	if aligned+plugins > 0 {
		detail = fmt.Sprintf("%s with accelerators and EFA both on DRA (alignable with matchAttribute %s), %d with both on device plugins (no alignment possible)", count(aligned, "node"), AttributePCIeRoot, plugins)
	}
	return Check{Name: CheckAlignment, Status: OK, Detail: detail}
}

var bottlerocketVersion = regexp.MustCompile(`^Bottlerocket OS (\d+\.\d+\.\d+)`)

// checkBottlerocket fails where the NVIDIA DRA driver runs on Bottlerocket
// older than 1.63.0: its NVIDIA variant ships the NVIDIA device plugin on,
// and only 1.63.0 and later can turn it off
// (settings.kubelet-device-plugins.nvidia.enabled), so both hand out the
// same GPUs.
func checkBottlerocket(nodes []nodeView) Check {
	min := semver.MustParse(bottlerocketMinimum)
	var old []string
	onDRA := 0
	for _, n := range nodes {
		m := bottlerocketVersion.FindStringSubmatch(n.node.Status.NodeInfo.OSImage)
		if m == nil || n.devices["gpu.nvidia.com"] == 0 {
			continue
		}
		onDRA++
		if v, err := semver.Parse(m[1]); err == nil && v.LT(min) {
			old = append(old, n.name()+" ("+m[1]+")")
		}
	}
	switch {
	case len(old) > 0:
		return Check{Name: CheckBottlerocket, Status: Fail, Nodes: old,
			Detail: fmt.Sprintf("%s older than %s run the NVIDIA DRA driver (%s): their built-in NVIDIA device plugin cannot be turned off, so the same GPUs are handed out twice", count(len(old), "Bottlerocket node"), bottlerocketMinimum, nodeList(old)),
			Fix:    fmt.Sprintf("upgrade these nodes to Bottlerocket %s or later and set settings.kubelet-device-plugins.nvidia.enabled = false in their user data, or run the device plugin alone there", bottlerocketMinimum)}
	case onDRA > 0:
		return Check{Name: CheckBottlerocket, Status: OK, Detail: fmt.Sprintf("%s on the NVIDIA DRA driver run %s or later (their built-in device plugin must be off: settings.kubelet-device-plugins.nvidia.enabled = false)", count(onDRA, "Bottlerocket node"), bottlerocketMinimum)}
	}
	return Check{Name: CheckBottlerocket, Status: OK, Detail: "no Bottlerocket node runs the NVIDIA DRA driver"}
}

// count is "1 node", "3 nodes".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
