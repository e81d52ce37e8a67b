package explaincmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lockstep-dev/lockstep/internal/explain"
)

// printTopology prints where a unit with topology may go: the domain the
// scheduler places it in, the domain where most members fit, and each
// level's domains (the first listLimit, most members fitting first, unless
// wide).
func printTopology(out io.Writer, r *explain.Report, wide bool) {
	t := r.TopologyDomains
	fmt.Fprintf(out, "7. Topology: %s\n", t.Constraint)
	total := r.Bound + r.Pending
	switch {
	case t.PlacedIn != "":
		fmt.Fprintf(out, "   The scheduler places it in %s.\n", t.PlacedIn)
	case t.PreemptIn != "":
		fmt.Fprintf(out, "   Not placed now; a preemption would make room in %s.\n", t.PreemptIn)
	case t.BestAttempt != "":
		fmt.Fprintf(out, "   Not placed now; its best attempt was in %s.\n", t.BestAttempt)
	}
	if l := t.Largest; l != nil {
		fmt.Fprintf(out, "   Most members fit in %s: %d of %d%s.\n", l.Name, l.Fit, total, minCountNote(r, l.Admitted))
	}
	for _, lv := range t.Levels {
		fmt.Fprintf(out, "   %s %s: %d domain(s)\n", lv.Kind, lv.Key, len(lv.Domains))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		head := []string{"DOMAIN", "NODES"}
		if len(lv.Domains) > 0 {
			for _, d := range lv.Domains[0].Devices {
				head = append(head, "FREE "+d.Class)
			}
		}
		fmt.Fprintf(tw, "     %s\n", strings.Join(append(head, "FREE CPU", "FREE MEMORY", "MEMBERS FIT"), "\t"))
		n := shown(len(lv.Domains), wide)
		for _, d := range lv.Domains[:n] {
			row := []string{d.Name, fmt.Sprint(d.Nodes)}
			for _, dd := range d.Devices {
				row = append(row, fmt.Sprintf("%d of %d", dd.Free, dd.Total))
			}
			fit := fmt.Sprintf("%d of %d", d.Fit, total)
			if d.Admitted {
				fit += " (admitted)"
			}
			row = append(row, resource.NewMilliQuantity(d.FreeMilliCPU, resource.DecimalSI).String(),
				resource.NewQuantity(d.FreeMemory>>20<<20, resource.BinarySI).String(), fit) // in whole Mi
			fmt.Fprintf(tw, "     %s\n", strings.Join(row, "\t"))
		}
		_ = tw.Flush()
		more(out, len(lv.Domains), n, "domains of "+lv.Key)
	}
	for _, e := range t.Excluded {
		fmt.Fprintf(out, "   in no domain: %d %s\n", e.Nodes, e.Reason)
	}
}

// minCountNote says whether the count reaches a gang's minCount.
func minCountNote(r *explain.Report, admitted bool) string {
	switch {
	case !r.Gang:
		return ""
	case admitted:
		return fmt.Sprintf(" (minCount %d met)", r.MinCount)
	}
	return fmt.Sprintf(" (minCount %d not met)", r.MinCount)
}
