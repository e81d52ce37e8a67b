package topology

import (
	"fmt"
	"strings"
)

// Constraint is where a unit's members must, and would rather, run.
type Constraint struct {
	// Required node label keys: all members in one value of each.
	Required []string
	// Preferred node label keys, narrowest first.
	Preferred []string
	// DeviceAttribute is a qualified device attribute name
	// ("gpu.example.com/clique"): every member's devices that carry it
	// share one value of it.
	DeviceAttribute string
}

// IsZero reports whether the unit may go anywhere.
func (c Constraint) IsZero() bool {
	return len(c.Required) == 0 && len(c.Preferred) == 0 && c.DeviceAttribute == ""
}

// String is how messages name it: "required [zone], preferred [rack block]".
func (c Constraint) String() string {
	var parts []string
	if len(c.Required) > 0 {
		parts = append(parts, fmt.Sprintf("required %v", c.Required))
	}
	if len(c.Preferred) > 0 {
		parts = append(parts, fmt.Sprintf("preferred %v", c.Preferred))
	}
	if c.DeviceAttribute != "" {
		parts = append(parts, "devices sharing "+c.DeviceAttribute)
	}
	return strings.Join(parts, ", ")
}
