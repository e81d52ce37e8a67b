// Package typename reads kubectl's resource arguments: TYPE, TYPE NAME…,
// or TYPE/NAME….
package typename

import (
	"fmt"
	"strings"
)

// Ref is one resource argument: its type, lowercased as kubectl matches
// types, and its name ("" for a bare TYPE).
type Ref struct {
	Type, Name string
}

// Parse reads args as kubectl does: `TYPE`, `TYPE NAME [NAME…]`, or
// `TYPE/NAME [TYPE/NAME…]` — not the two forms mixed.
func Parse(args []string) ([]Ref, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no resource given: pass TYPE NAME or TYPE/NAME")
	}
	if strings.Contains(args[0], "/") {
		refs := make([]Ref, 0, len(args))
		for _, a := range args {
			t, n, ok := strings.Cut(a, "/")
			switch {
			case !ok:
				return nil, fmt.Errorf("%q after %q: pass every resource as TYPE/NAME, or TYPE NAME NAME… with the type once", a, args[0])
			case t == "" || n == "" || strings.Contains(n, "/"):
				return nil, fmt.Errorf("%q: want TYPE/NAME, e.g. podgroup/train", a)
			}
			refs = append(refs, Ref{Type: strings.ToLower(t), Name: n})
		}
		return refs, nil
	}
	t := strings.ToLower(args[0])
	if len(args) == 1 {
		return []Ref{{Type: t}}, nil
	}
	refs := make([]Ref, 0, len(args)-1)
	for _, n := range args[1:] {
		if strings.Contains(n, "/") {
			return nil, fmt.Errorf("%q after the type %q: pass TYPE NAME, or TYPE/NAME without a separate type", n, args[0])
		}
		refs = append(refs, Ref{Type: t, Name: n})
	}
	return refs, nil
}
