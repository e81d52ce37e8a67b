package explaincmd

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/internal/explain"
)

func TestPrintReportLists(t *testing.T) {
	r := &explain.Report{Answer: "waiting", Devices: []explain.ClassReport{{Class: "gpu", Exists: true, Total: 30, Allocated: 30}}}
	for i := 0; i < 15; i++ {
		r.Devices[0].PerNode = append(r.Devices[0].PerNode, explain.NodeDevice{Node: fmt.Sprintf("node-%02d", i), Matching: 2, Allocated: 2})
	}
	r.Devices[0].Tainted = []string{"node-00/gpu-0 NoSchedule:broken="}
	for _, tc := range []struct {
		wide      bool
		nodes     int
		more      string
		lastShown string
	}{
		{wide: false, nodes: 10, more: "… 5 more nodes with matching devices (-o wide lists them)", lastShown: "node-09"},
		{wide: true, nodes: 15, lastShown: "node-14"},
	} {
		t.Run(fmt.Sprintf("wide=%v", tc.wide), func(t *testing.T) {
			var out bytes.Buffer
			printReport(&out, r, tc.wide)
			s := out.String()
			if got := strings.Count(s, " matching, "); got != tc.nodes {
				t.Errorf("%d node lines, want %d:\n%s", got, tc.nodes, s)
			}
			if !strings.Contains(s, tc.lastShown+":") {
				t.Errorf("%s not listed:\n%s", tc.lastShown, s)
			}
			if tc.more != "" && !strings.Contains(s, tc.more) {
				t.Errorf("want %q:\n%s", tc.more, s)
			}
			if tc.more == "" && strings.Contains(s, "more nodes") {
				t.Errorf("wide output says entries were left out:\n%s", s)
			}
			if !strings.Contains(s, "tainted: node-00/gpu-0") || strings.Contains(s, "more tainted") {
				t.Errorf("a list under the limit is printed whole:\n%s", s)
			}
		})
	}
}
