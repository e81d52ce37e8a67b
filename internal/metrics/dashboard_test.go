package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every Lockstep metric the chart's Grafana dashboard queries is one
// docs/metrics.md documents (a renamed metric leaves no empty panel
// behind), and panel ids are unique.
func TestDashboardQueriesDocumentedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../charts/lockstep/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	name := regexp.MustCompile(`lockstep_[a-z_]+`)
	ids := map[int]string{}
	for _, p := range d.Panels {
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					m = strings.TrimSuffix(m, suffix)
				}
				if !strings.Contains(string(doc), "`"+m) {
					t.Errorf("panel %q queries %s, which docs/metrics.md does not document", p.Title, m)
				}
			}
		}
	}
	if len(d.Panels) == 0 {
		t.Error("the dashboard has no panels")
	}
}
