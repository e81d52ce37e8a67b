package podgroup

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// KeyError is what is wrong with a topology annotation's value, and how to
// write it.
type KeyError struct{ Problem, Fix string }

func (e *KeyError) Error() string { return e.Problem + ": " + e.Fix }

const keysFix = "list node label keys, narrowest first, separated by commas, e.g. example.com/rack,topology.kubernetes.io/zone"

// CheckKeys checks the value of a topology annotation that lists node
// label keys: each item a valid label key, none empty, none twice. The
// same rule holds wherever the annotation is written — a PodGroup, a Job,
// any kind Lockstep integrates. An empty value names no level.
func CheckKeys(s string) *KeyError {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	items := strings.Split(s, ",")
	seen := make(map[string]bool, len(items))
	for i, k := range items {
		k = strings.TrimSpace(k)
		if k == "" {
			return &KeyError{fmt.Sprintf("item %d of %q is empty", i+1, s), keysFix}
		}
		if seen[k] {
			return &KeyError{fmt.Sprintf("%q is listed twice", k), keysFix}
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return &KeyError{fmt.Sprintf("%q is not a node label key (%s)", k, errs[0]), keysFix}
		}
		seen[k] = true
	}
	return nil
}

// CheckDeviceAttribute checks the value of the device-topology annotation:
// one qualified device attribute, domain/name; empty names none.
func CheckDeviceAttribute(s string) *KeyError {
	d := strings.TrimSpace(s)
	if d == "" {
		return nil
	}
	if errs := validation.IsQualifiedName(d); len(errs) > 0 || !strings.Contains(d, "/") {
		return &KeyError{fmt.Sprintf("%q is not a qualified device attribute", d), "name one device attribute with its domain, e.g. gpu.example.com/clique"}
	}
	return nil
}
