package explaincmd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/placement"
)

// The topology section names the scheduler's domain and the largest one,
// and lists each level's domains, at most listLimit of them unless wide.
func TestPrintTopology(t *testing.T) {
	racks := explain.TopologyLevel{Kind: explain.LevelPreferred, Key: "example.com/rack"}
	for i := 0; i < 12; i++ {
		racks.Domains = append(racks.Domains, explain.DomainReport{
			Name: fmt.Sprintf("zone=a, example.com/rack=r%02d", i), Nodes: 4, Fit: 8 - i/2, Admitted: i == 0,
			Devices:      []explain.DomainDevices{{Class: "gpu.example.com", Free: 8 - i/2, Total: 32}},
			FreeMilliCPU: 31500, FreeMemory: 128 << 30,
		})
	}
	zones := explain.TopologyLevel{Kind: explain.LevelRequired, Key: "zone", Domains: []explain.DomainReport{{
		Name: "zone=a", Nodes: 48, Fit: 8, Admitted: true, Devices: []explain.DomainDevices{{Class: "gpu.example.com", Free: 60, Total: 384}},
	}}}
	r := &explain.Report{Answer: "fits", Gang: true, MinCount: 8, Pending: 8, TopologyDomains: &explain.TopologyReport{
		Constraint: "required [zone], preferred [example.com/rack]", PlacedIn: "zone=a, example.com/rack=r00",
		Largest: &racks.Domains[0], Levels: []explain.TopologyLevel{racks, zones},
		Excluded: []placement.ReasonCount{{Reason: "node(s) lack the topology labels [zone]", Nodes: 3}},
	}}
	for _, tc := range []struct {
		wide  bool
		racks int
		want  []string
	}{
		{racks: 10, want: []string{
			"7. Topology: required [zone], preferred [example.com/rack]",
			"   The scheduler places it in zone=a, example.com/rack=r00.",
			"   Most members fit in zone=a, example.com/rack=r00: 8 of 8 (minCount 8 met).",
			"   preferred example.com/rack: 12 domain(s)",
			"     DOMAIN                        NODES  FREE gpu.example.com  FREE CPU  FREE MEMORY  MEMBERS FIT",
			"     zone=a, example.com/rack=r00  4      8 of 32               31500m    128Gi        8 of 8 (admitted)",
			"   … 2 more domains of example.com/rack (-o wide lists them)",
			"   required zone: 1 domain(s)",
			"   in no domain: 3 node(s) lack the topology labels [zone]",
		}},
		{wide: true, racks: 12, want: []string{"     zone=a, example.com/rack=r11  4      3 of 32               31500m    128Gi        3 of 8"}},
	} {
		t.Run(fmt.Sprintf("wide=%v", tc.wide), func(t *testing.T) {
			var out bytes.Buffer
			printReport(&out, r, tc.wide)
			lines := strings.Split(out.String(), "\n")
			var missing []string
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					missing = append(missing, w)
				}
			}
			if diff := cmp.Diff([]string(nil), missing); diff != "" {
				t.Errorf("lines missing (-want,+got):\n%s\n%s", diff, out.String())
			}
			if got := strings.Count(out.String(), ", example.com/rack=r"); got != tc.racks+2 { // + placed in, most members
				t.Errorf("%d rack lines, want %d:\n%s", got-2, tc.racks, out.String())
			}
		})
	}
}
