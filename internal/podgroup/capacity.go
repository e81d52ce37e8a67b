package podgroup

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// CapacityType is how a node is bought: on-demand, reserved (an EC2
// capacity reservation or capacity block) or spot.
type CapacityType string

// The capacity types, as Karpenter names them.
const (
	OnDemand CapacityType = "on-demand"
	Reserved CapacityType = "reserved"
	Spot     CapacityType = "spot"
)

// Node labels that say a node's capacity type.
const (
	LabelKarpenterCapacityType = "karpenter.sh/capacity-type"
	LabelEKSCapacityType       = "eks.amazonaws.com/capacityType"
)

// DefaultCapacityTypes are the capacity types a group without
// lockstep's capacity-types annotation may use unless the scheduler is
// told otherwise: every type but spot.
var DefaultCapacityTypes = CapacityTypes{OnDemand, Reserved}

// NodeCapacityType is the node's capacity type from its Karpenter or EKS
// managed node group label; a node with neither is on-demand.
func NodeCapacityType(n *corev1.Node) CapacityType {
	switch v := n.Labels[LabelKarpenterCapacityType]; v {
	case string(OnDemand), string(Reserved), string(Spot):
		return CapacityType(v)
	}
	switch n.Labels[LabelEKSCapacityType] {
	case "SPOT":
		return Spot
	case "CAPACITY_BLOCK":
		return Reserved
	}
	return OnDemand
}

// CapacityTypes is a set of capacity types, in the order written.
type CapacityTypes []CapacityType

// Allows reports whether a node of type t may be used.
func (c CapacityTypes) Allows(t CapacityType) bool { return slices.Contains(c, t) }

// AllowsAll reports whether every capacity type is allowed (the policy
// filters nothing).
func (c CapacityTypes) AllowsAll() bool {
	return c.Allows(OnDemand) && c.Allows(Reserved) && c.Allows(Spot)
}

func (c CapacityTypes) String() string {
	parts := make([]string, len(c))
	for i, t := range c {
		parts[i] = string(t)
	}
	return strings.Join(parts, ",")
}

// ParseCapacityTypes reads "on-demand,reserved,spot": each item one of the
// three, at least one, none twice.
func ParseCapacityTypes(s string) (CapacityTypes, *KeyError) {
	const fix = "list capacity types separated by commas, of on-demand, reserved and spot, e.g. on-demand,reserved"
	var out CapacityTypes
	for _, item := range strings.Split(s, ",") {
		t := CapacityType(strings.TrimSpace(item))
		switch {
		case t != OnDemand && t != Reserved && t != Spot:
			return nil, &KeyError{fmt.Sprintf("%q is not a capacity type", t), fix}
		case out.Allows(t):
			return nil, &KeyError{fmt.Sprintf("%q is listed twice", t), fix}
		}
		out = append(out, t)
	}
	return out, nil
}

// GroupCapacityTypes are the capacity types a group's members may use:
// its annotation's, else, for a gang (which restarts whole when a node is
// interrupted), def; nil (any) for a basic group or none. An annotation
// that does not parse (refused at admission; written before this
// release) counts as absent.
func GroupCapacityTypes(pg *lockv1.PodGroup, def CapacityTypes) CapacityTypes {
	if pg == nil {
		return nil
	}
	if v, ok := pg.Annotations[lockv1.CapacityTypesAnnotation]; ok {
		if c, err := ParseCapacityTypes(v); err == nil {
			return c
		}
	}
	if !IsGang(pg) {
		return nil
	}
	return def
}

// DefaultCapacityTypesFlag is --default-capacity-types (a pflag.Value):
// setting it sets DefaultCapacityTypes for the process, one policy for
// every decision and admission it makes. The scheduler, the webhook and
// explain take it, so they judge a group without the annotation alike.
type DefaultCapacityTypesFlag struct{}

// DefaultCapacityTypesUsage is the flag's help.
const DefaultCapacityTypesUsage = "capacity types (on-demand, reserved, spot) a group may use unless its " + lockv1.CapacityTypesAnnotation +
	" annotation says otherwise; a gang restarts whole at each Spot interruption, so the default leaves spot out"

func (DefaultCapacityTypesFlag) String() string { return DefaultCapacityTypes.String() }

// Set parses and applies the flag's value.
func (DefaultCapacityTypesFlag) Set(s string) error {
	c, err := ParseCapacityTypes(s)
	if err != nil {
		return err
	}
	DefaultCapacityTypes = c
	return nil
}

// Type names the flag's value in help.
func (DefaultCapacityTypesFlag) Type() string { return "types" }
