package explain

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
)

// Report is the answer and its evidence.
type Report struct {
	// Answer comes first: one sentence.
	Answer string `json:"answer"`
	// Unit is what was explained, e.g. "PodGroup ml-team/train-b".
	Unit string `json:"unit"`
	// Tree is the root of the scheduling tree the unit's group hangs in
	// (e.g. "CompositePodGroup ml/job"): the scheduler decides that tree
	// as one unit, and so does the answer.
	Tree string `json:"tree,omitempty"`
	// Condition is the group's PodGroupInitiallyScheduled condition.
	Condition *metav1.Condition `json:"condition,omitempty"`
	// State is the group's Running condition: what it is doing now.
	State *metav1.Condition `json:"state,omitempty"`
	// Incarnation is the group's current admission (number, members, end).
	Incarnation *Incarnation `json:"incarnation,omitempty"`
	// LastRestart is the group's DisruptionTarget condition: why it was
	// last taken down whole (a lost member, a failed or unhealthy device),
	// kept after the pods that showed it are gone.
	LastRestart *metav1.Condition `json:"lastRestart,omitempty"`
	// LastEvent is the newest FailedScheduling/Waiting event of the unit.
	LastEvent string `json:"lastEvent,omitempty"`
	Gang      bool   `json:"gang"`
	MinCount  int    `json:"minCount"`
	Members   int    `json:"members"`
	Bound     int    `json:"bound"`
	Pending   int    `json:"pending"`
	// Claims of the pending members and their state.
	Claims []ClaimState `json:"claims,omitempty"`
	// Nodes is how many nodes the cluster has; Reasons how many of them fail
	// each check for the first pod that does not fit.
	Nodes   int                     `json:"nodes"`
	Reasons []placement.ReasonCount `json:"reasons,omitempty"`
	// ExtendedResources requested and what nodes advertise of them.
	ExtendedResources []ExtendedResource `json:"extendedResources,omitempty"`
	// Devices per DeviceClass requested.
	Devices []ClassReport `json:"devices,omitempty"`
	// Topology are the group's required keys (spec.schedulingConstraints).
	Topology []string `json:"topology,omitempty"`
	// TopologyDomains is where a unit with topology may go, domain by
	// domain (nil without topology, or when the unit waits before
	// placement).
	TopologyDomains *TopologyReport `json:"topologyDomains,omitempty"`
	// Holders are the running units that hold devices of the requested classes.
	Holders []Holder `json:"holders,omitempty"`
	// Preemption is what the scheduler's preemption search concludes for
	// the unit now: the victims it would evict, or why it cannot help.
	Preemption string `json:"preemption,omitempty"`
	// MoreNodes says how many more nodes of which node group would make a
	// gang that does not fit fit (nodes like the group's own, with their
	// devices), as the scheduler says it in the group's condition.
	MoreNodes string `json:"moreNodes,omitempty"`
	// DeviceHealth is every device of the unit's pods whose kubelet
	// reports it other than Healthy (pod status allocatedResourcesStatus);
	// HealthyDevices counts those reported Healthy. A member's last report
	// stays on its pod after it ended, until the pod is deleted; the
	// incarnation's end names the device that ended it.
	DeviceHealth   []dra.DeviceHealth `json:"deviceHealth,omitempty"`
	HealthyDevices int                `json:"healthyDevices,omitempty"`
	// Notes say where explain could not see the cluster as the scheduler
	// does (e.g. DeviceTaintRules it may not read).
	Notes []string `json:"notes,omitempty"`
}

// TopologyReport is where a unit with topology may go: its constraint, the
// domain the scheduler's decision places it in, and each level's domains
// with what is free there and how many members fit.
type TopologyReport struct {
	// Constraint is e.g. "required [zone], preferred [rack]".
	Constraint string `json:"constraint"`
	// PlacedIn is the domain the decision places the unit in ("" when it
	// is not placed now: BestAttempt is the domain of its best attempt,
	// PreemptIn the one a preemption would make room in).
	PlacedIn    string `json:"placedIn,omitempty"`
	BestAttempt string `json:"bestAttempt,omitempty"`
	PreemptIn   string `json:"preemptIn,omitempty"`
	// Largest is the domain where the most members fit (the narrowest
	// level first when several hold as many).
	Largest *DomainReport `json:"largest,omitempty"`
	// Levels in the order the scheduler tries them: preferred levels
	// narrowest first, then the required domains (or every node).
	Levels []TopologyLevel `json:"levels"`
	// Excluded counts the nodes in no domain, by reason (labels missing,
	// outside where the running members are).
	Excluded []placement.ReasonCount `json:"excluded,omitempty"`
}

// TopologyLevel is one level's domains, most members fitting first
// (equals in the order the scheduler tries them).
type TopologyLevel struct {
	// Kind is preferred, required or any (every node).
	Kind string `json:"kind"`
	// Key is the preferred key, the required keys and device attribute
	// joined by " + ", or "all nodes".
	Key     string         `json:"key"`
	Domains []DomainReport `json:"domains"`
}

// DomainReport is one domain as the unit sees it.
type DomainReport struct {
	// Name is "zone=z1, rack=r3" (a device attribute as "attr=value").
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	// Devices are the free and total devices of each DeviceClass the unit
	// asks for (only those of the domain's device value).
	Devices      []DomainDevices `json:"devices,omitempty"`
	FreeMilliCPU int64           `json:"freeMilliCPU"`
	FreeMemory   int64           `json:"freeMemoryBytes"`
	// Fit is how many members (bound ones included) the scheduler's
	// placement fits here; Admitted whether the unit would be admitted
	// here (a gang: Fit reaches minCount).
	Fit      int  `json:"membersFit"`
	Admitted bool `json:"admitted"`
}

// DomainDevices are a domain's devices of one DeviceClass.
type DomainDevices struct {
	Class string `json:"class"`
	Free  int    `json:"free"`
	Total int    `json:"total"`
}

// ClaimState is one claim of a pending pod.
type ClaimState struct {
	Pod   string `json:"pod"`
	Claim string `json:"claim"`
	State string `json:"state"`
}

// ExtendedResource is a requested extended resource.
type ExtendedResource struct {
	Name string `json:"name"`
	// PerPod is the request of one pod.
	PerPod int64 `json:"perPod"`
	// Nodes advertising it, and the total and free allocatable.
	Nodes int   `json:"nodes"`
	Total int64 `json:"total"`
	Free  int64 `json:"free"`
	// DeviceClass serving it through DRA on nodes that do not advertise
	// it ("" if none): its devices are reported under devices.
	DeviceClass string `json:"deviceClass,omitempty"`
	// NotAllocatable are the nodes whose capacity of it exceeds their
	// allocatable ("node: capacity 8, allocatable 0"): the device plugin
	// reports those devices unhealthy, or the kubelet has not registered
	// them (seed 003, step 2).
	NotAllocatable []string `json:"notAllocatable,omitempty"`
}

// ClassReport is the state of one DeviceClass.
type ClassReport struct {
	Class  string `json:"class"`
	Exists bool   `json:"exists"`
	// Total, Allocated and Partial count devices as dra.ClassCount does: a
	// partitionable device (a GPU and its MIG partitions) once, partly
	// allocated while some of its partitions are.
	Total     int          `json:"total"`
	Allocated int          `json:"allocated"`
	Partial   int          `json:"partial,omitempty"`
	PerNode   []NodeDevice `json:"perNode,omitempty"`
	// Tainted devices ("node/device effect key") matching the class.
	Tainted []string `json:"tainted,omitempty"`
	// CELErrors from the class's selectors.
	CELErrors []string `json:"celErrors,omitempty"`
	// Drivers publish the class's devices somewhere in the cluster;
	// NoSlices are nodes the pending members could use (they pass their
	// node selection and taints) that publish no ResourceSlice of any of
	// them — nodes of an instance type where the drivers do publish, or any
	// such node when the members select nodes explicitly: the driver's
	// kubelet plugin (DaemonSet) is missing or not ready there, the most
	// common failure after an AMI or driver upgrade (seed 003, step 3).
	Drivers  []string `json:"drivers,omitempty"`
	NoSlices []string `json:"noSlices,omitempty"`
}

// NodeDevice is one node's devices of a class.
type NodeDevice struct {
	Node      string   `json:"node"`
	Matching  int      `json:"matching"`
	Allocated int      `json:"allocated"`
	Partial   int      `json:"partial,omitempty"`
	To        []string `json:"allocatedTo,omitempty"`
}

// Holder is a running unit holding devices the explained unit wants.
type Holder struct {
	Unit     string `json:"unit"`
	Priority int32  `json:"priority"`
	Devices  int    `json:"devices"`
	// Preemptible: strictly lower priority than the explained unit.
	Preemptible bool `json:"preemptible"`
}

// Incarnation summarizes the group's current incarnation.
type Incarnation struct {
	Number    int32  `json:"number"`
	Members   int    `json:"members"`
	Succeeded int    `json:"succeeded,omitempty"`
	Removed   int    `json:"removed,omitempty"`
	BoundTime string `json:"boundTime"`
	// Ended is "<reason>: <message>" once it is over.
	Ended string `json:"ended,omitempty"`
}

// UnitRef is the explained unit as kubectl's -o name prints it, e.g.
// "podgroup.scheduling.lockstep.dev/train-b" or "pod/p".
func (r *Report) UnitRef() string {
	kind, name, _ := strings.Cut(r.Unit, " ")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	switch kind {
	case "PodGroup":
		return "podgroup.scheduling.lockstep.dev/" + name
	case "Job":
		return "job.batch/" + name
	}
	return strings.ToLower(kind) + "/" + name
}
