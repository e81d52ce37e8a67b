package topology

import (
	"sort"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// DeviceValues are the distinct values attr has on the devices of the
// node's own slices, sorted.
func DeviceValues(ni *snapshot.NodeInfo, attr string) []string {
	seen := map[string]bool{}
	for _, s := range ni.Slices {
		for i := range s.Spec.Devices {
			if v, ok := AttributeValue(s.Spec.Driver, &s.Spec.Devices[i], attr); ok {
				seen[v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// deviceValue is attr's value on device driver/pool/device of ni's slices.
func deviceValue(ni *snapshot.NodeInfo, driver, pool, device, attr string) (string, bool) {
	for _, s := range ni.Slices {
		if s.Spec.Driver != driver || s.Spec.Pool.Name != pool {
			continue
		}
		for i := range s.Spec.Devices {
			if s.Spec.Devices[i].Name == device {
				return AttributeValue(driver, &s.Spec.Devices[i], attr)
			}
		}
	}
	return "", false
}

// AttributeValue is the value of the qualified attribute attr
// ("domain/name") on a device of driver, as a string; an attribute
// published without a domain is the driver's ("driver/name").
func AttributeValue(driver string, d *resourcev1.Device, attr string) (string, bool) {
	for name, a := range d.Attributes {
		q := string(name)
		if !strings.Contains(q, "/") {
			q = driver + "/" + q
		}
		if q != attr {
			continue
		}
		switch {
		case a.StringValue != nil:
			return *a.StringValue, true
		case a.IntValue != nil:
			return strconv.FormatInt(*a.IntValue, 10), true
		case a.BoolValue != nil:
			return strconv.FormatBool(*a.BoolValue), true
		case a.VersionValue != nil:
			return *a.VersionValue, true
		}
	}
	return "", false
}

// KeepDevice is the device filter of a domain with a device value: a
// device that carries the attribute is usable only with the domain's value
// (devices without it — a NIC beside the GPUs — are not constrained).
func (d Domain) KeepDevice() func(driver string, dev *resourcev1.Device) bool {
	rules := d.outer
	if d.Attribute != "" {
		rules = append(append([]deviceRule(nil), rules...), deviceRule{d.Attribute, d.Device})
	}
	if len(rules) == 0 {
		return nil
	}
	return func(driver string, dev *resourcev1.Device) bool {
		for _, r := range rules {
			if v, ok := AttributeValue(driver, dev, r.attribute); ok && v != r.value {
				return false
			}
		}
		return true
	}
}
