package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The table is a function of the report alone: each golden scenario's
// JSON report, read back, renders its golden table — so scripts reading
// -o json see everything the table shows. The HTML report renders from
// it too, with a chart per measurement.
func TestTableFromJSON(t *testing.T) {
	for _, name := range []string{"seed004", "mixed", "trees"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", name)
			b, err := os.ReadFile(filepath.Join(dir, "report.json.golden"))
			if err != nil {
				t.Fatal(err)
			}
			var r Report
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "report.golden"))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := WriteTable(&got, &r, true); err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				t.Errorf("the table rendered from %s/report.json.golden differs from report.golden:\n%s", name, got.String())
			}
			var html bytes.Buffer
			if err := WriteHTML(&html, &r); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(html.String(), "<svg"); n < 5 {
				t.Errorf("the HTML report has %d charts, want one per measurement (5)", n)
			}
		})
	}
}
