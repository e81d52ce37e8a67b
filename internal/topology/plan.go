package topology

import (
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Label is one key=value a domain's nodes share.
type Label struct{ Key, Value string }

// Domain is a set of nodes a unit is tried in.
type Domain struct {
	// Level is the preferred key this domain is one value of; "" for a
	// required domain as a whole (or every node, without required levels).
	Level string
	// Labels are the values its nodes share: the required keys', then the
	// level's.
	Labels []Label
	// Device is the value of the constraint's device attribute the
	// members' devices share here ("" without one).
	Device string
	// Attribute is the constraint's device attribute ("" without one).
	Attribute string
	Nodes     []*snapshot.NodeInfo
	// Open are the nodes of the domain's labels whose slices carry no
	// device with the attribute (CPU nodes beside a GPU clique): members
	// that hold no device may run there too — an MPI launcher, a Ray head —
	// members that hold one may not. Empty without an attribute.
	Open []*snapshot.NodeInfo
	// outer are the device values of the domains this one is inside (a
	// tree's parents'): its devices keep those too.
	outer []deviceRule
}

// deviceRule is one attribute=value a domain's devices must have.
type deviceRule struct{ attribute, value string }

// inherit makes d a domain inside parent: it keeps parent's labels and
// device values.
func (d *Domain) inherit(parent *Domain) {
	d.Labels = append(append([]Label(nil), parent.Labels...), d.Labels...)
	d.outer = append(d.outer, parent.outer...)
	if parent.Attribute != "" {
		d.outer = append(d.outer, deviceRule{parent.Attribute, parent.Device})
	}
}

// All are the domain's nodes and its open nodes.
func (d Domain) All() []*snapshot.NodeInfo {
	if len(d.Open) == 0 {
		return d.Nodes
	}
	return append(append(make([]*snapshot.NodeInfo, 0, len(d.Nodes)+len(d.Open)), d.Nodes...), d.Open...)
}

// String names the domain in messages: "zone=z1, rack=r3",
// "gpu.example.com/clique=7", "rack=r9, no device with
// gpu.example.com/clique" (open nodes only), or "all nodes".
func (d Domain) String() string {
	var parts []string
	for _, l := range d.Labels {
		parts = append(parts, l.Key+"="+l.Value)
	}
	switch {
	case d.Attribute != "" && len(d.Nodes) == 0:
		parts = append(parts, "no device with "+d.Attribute)
	case d.Attribute != "":
		parts = append(parts, d.Attribute+"="+d.Device)
	}
	if len(parts) == 0 {
		return "all nodes"
	}
	return strings.Join(parts, ", ")
}

// Placed is a running member: where it runs and which devices it holds
// (from its claims' allocations).
type Placed struct {
	Node    string
	Devices []resourcev1.DeviceRequestAllocationResult
}

// Plan is the domains to try for a unit, in order, and the nodes no
// domain holds, counted by reason (for the unit's diagnosis).
type Plan struct {
	Domains  []Domain
	Excluded map[string]int
}

// Reasons nodes are left out of every domain.
const (
	reasonNoLabelsFmt  = "node(s) lack the topology labels %v"
	reasonElsewhereFmt = "node(s) outside %s, where the gang's running members are"
)

// NoDevice is why a domain's open nodes cannot take a member that holds a
// device.
func NoDevice(attribute string) string {
	return fmt.Sprintf("node(s) have no device with attribute %s", attribute)
}

// PlanFor orders the domains a unit with constraint c may be placed in
// (see the package doc). running are its members already placed: the
// unit is pinned to the required domain they share and tries first the
// preferred domains they share. A unit without constraint has one
// domain: every node.
func PlanFor(snap *snapshot.Snapshot, c Constraint, running []Placed) Plan {
	return PlanWithin(&Domain{Nodes: snap.Nodes}, c, running)
}

// PlanWithin is PlanFor inside parent's nodes (and open nodes) only — a
// child of a scheduling tree is placed inside its parent's domain — whose
// labels and device value, if it has one, the child's domains keep.
func PlanWithin(parent *Domain, c Constraint, running []Placed) Plan {
	p := Plan{Excluded: map[string]int{}}
	required := p.requiredDomains(parent.All(), c)
	for i := range required {
		required[i].inherit(parent)
	}
	if len(running) > 0 && len(required) > 0 {
		required = p.pinRequired(required, c, running)
	}
	sortDomains(required)
	for _, key := range c.Preferred {
		p.Domains = append(p.Domains, preferredDomains(required, key, running)...)
	}
	p.Domains = append(p.Domains, required...)
	return p
}

// requiredDomains splits the nodes by their values of the required keys
// (and the device attribute); nodes without the keys are excluded. A node
// whose devices do not carry the attribute is open in every domain of its
// labels; labels with open nodes only make a domain of their own, for
// members that hold no device.
func (p *Plan) requiredDomains(nodes []*snapshot.NodeInfo, c Constraint) []Domain {
	type labelled struct {
		labels  []Label
		domains []*Domain
		open    []*snapshot.NodeInfo
	}
	byLabels := map[string]*labelled{}
	byKey := map[string]*Domain{}
	var order []string
	for _, ni := range nodes {
		labels, ok := labelsOf(ni, c.Required)
		if !ok {
			p.Excluded[fmt.Sprintf(reasonNoLabelsFmt, c.Required)]++
			continue
		}
		ls := labelString(labels)
		l := byLabels[ls]
		if l == nil {
			l = &labelled{labels: labels}
			byLabels[ls] = l
			order = append(order, ls)
		}
		devices := []string{""}
		if c.DeviceAttribute != "" {
			if devices = DeviceValues(ni, c.DeviceAttribute); len(devices) == 0 {
				l.open = append(l.open, ni)
				continue
			}
		}
		for _, dv := range devices {
			k := ls + "\x00" + dv
			d := byKey[k]
			if d == nil {
				d = &Domain{Labels: labels, Device: dv, Attribute: c.DeviceAttribute}
				byKey[k] = d
				l.domains = append(l.domains, d)
			}
			d.Nodes = append(d.Nodes, ni)
		}
	}
	var out []Domain
	for _, ls := range order {
		l := byLabels[ls]
		if len(l.domains) == 0 {
			out = append(out, Domain{Labels: l.labels, Attribute: c.DeviceAttribute, Open: l.open})
			continue
		}
		for _, d := range l.domains {
			d.Open = l.open
			out = append(out, *d)
		}
	}
	return out
}

// pinRequired keeps the required domain every running member is in; when
// they are not all in one (a unit admitted before its constraint could
// apply), none is dropped.
func (p *Plan) pinRequired(required []Domain, c Constraint, running []Placed) []Domain {
	var keep []Domain
	for _, d := range required {
		if holdsAll(d, running) {
			keep = append(keep, d)
		}
	}
	if len(keep) != 1 {
		return required
	}
	for _, d := range required {
		if !holdsAll(d, running) {
			p.Excluded[fmt.Sprintf(reasonElsewhereFmt, keep[0])] += len(d.Nodes)
		}
	}
	return keep
}

// holdsAll reports whether every running member is on a node of d (or
// one of its open nodes), on devices of d's device value.
func holdsAll(d Domain, running []Placed) bool {
	nodes := make(map[string]bool, len(d.Nodes)+len(d.Open))
	for _, ni := range d.All() {
		nodes[ni.Node.Name] = true
	}
	for _, r := range running {
		if !nodes[r.Node] {
			return false
		}
		if d.Attribute != "" && !devicesIn(r.Devices, d) {
			return false
		}
	}
	return true
}

// devicesIn reports whether every device of results that carries d's
// attribute has d's value.
func devicesIn(results []resourcev1.DeviceRequestAllocationResult, d Domain) bool {
	for _, r := range results {
		for _, ni := range d.Nodes {
			if v, ok := deviceValue(ni, r.Driver, r.Pool, r.Device, d.Attribute); ok && v != d.Device {
				return false
			}
		}
	}
	return true
}

// preferredDomains splits each required domain by key, smallest domain
// first; a split that is the whole required domain adds nothing. With
// running members, only the domain holding all of them is tried.
func preferredDomains(required []Domain, key string, running []Placed) []Domain {
	var out []Domain
	for _, r := range required {
		byValue := map[string]*Domain{}
		var values []string
		split := func(nodes []*snapshot.NodeInfo, open bool) {
			for _, ni := range nodes {
				v, ok := ni.Node.Labels[key]
				if !ok {
					continue
				}
				d := byValue[v]
				if d == nil {
					d = &Domain{Level: key, Labels: append(append([]Label(nil), r.Labels...), Label{key, v}), Device: r.Device, Attribute: r.Attribute, outer: r.outer}
					byValue[v] = d
					values = append(values, v)
				}
				if open {
					d.Open = append(d.Open, ni)
				} else {
					d.Nodes = append(d.Nodes, ni)
				}
			}
		}
		split(r.Nodes, false)
		split(r.Open, true)
		for _, v := range values {
			d := *byValue[v]
			// A split that is the whole required domain adds nothing; one
			// with open nodes only would leave out every member that holds
			// a device, unless the required domain is such a one too.
			if len(d.Nodes) == len(r.Nodes) && len(d.Open) == len(r.Open) || len(d.Nodes) == 0 && len(r.Nodes) > 0 ||
				len(running) > 0 && !holdsAll(d, running) {
				continue
			}
			out = append(out, d)
		}
	}
	sortDomains(out)
	return out
}

// sortDomains orders domains smallest first (a unit takes the tightest
// domain that fits it), then by name; domains of open nodes only (no
// device with the attribute) come last.
func sortDomains(ds []Domain) {
	sort.SliceStable(ds, func(i, j int) bool {
		if oi, oj := len(ds[i].Nodes) == 0 && len(ds[i].Open) > 0, len(ds[j].Nodes) == 0 && len(ds[j].Open) > 0; oi != oj {
			return oj
		}
		if len(ds[i].Nodes) != len(ds[j].Nodes) {
			return len(ds[i].Nodes) < len(ds[j].Nodes)
		}
		return ds[i].String() < ds[j].String()
	})
}

func labelsOf(ni *snapshot.NodeInfo, keys []string) ([]Label, bool) {
	out := make([]Label, 0, len(keys))
	for _, k := range keys {
		v, ok := ni.Node.Labels[k]
		if !ok {
			return nil, false
		}
		out = append(out, Label{k, v})
	}
	return out, true
}

func labelString(ls []Label) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Key + "=" + l.Value + "\x00")
	}
	return b.String()
}
