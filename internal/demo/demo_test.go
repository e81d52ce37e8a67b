package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestGather: the modes' clusters run side by side and send their
// scenarios' results as they go; gather prints a scenario's table once
// every mode has run it, in scenario order, and stops at the first mode
// that fails or stops early, naming it, without printing a table that
// mode did not finish.
func TestGather(t *testing.T) {
	errCluster := errors.New("kube-apiserver did not start")
	// each mode sends the first ran[i] scenarios, then fails[i] (may be nil).
	tests := map[string]struct {
		ran        []int
		fails      []error
		wantErr    string // "" when nothing is wrong
		wantTables int
	}{
		"every mode runs every scenario": {
			ran: []int{len(scenarios), len(scenarios), len(scenarios)}, fails: []error{nil, nil, nil}, wantTables: len(scenarios),
		},
		"a mode fails after the first scenario": {
			ran: []int{len(scenarios), 1, len(scenarios)}, fails: []error{nil, errCluster, nil},
			wantErr: modes[1].name + ": " + errCluster.Error(), wantTables: 1,
		},
		"a mode fails before any scenario": {
			ran: []int{len(scenarios), len(scenarios), 0}, fails: []error{nil, nil, errCluster},
			wantErr: modes[2].name + ": " + errCluster.Error(), wantTables: 0,
		},
		"a mode stops without an error": {
			ran: []int{2, len(scenarios), len(scenarios)}, fails: []error{nil, nil, nil},
			wantErr: modes[0].name + ": stopped before " + scenarios[2].name, wantTables: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			steps := make([]chan step, len(modes))
			for i := range modes {
				steps[i] = make(chan step, len(scenarios)+1)
				for _, sc := range scenarios[:tc.ran[i]] {
					steps[i] <- step{scenario: ScenarioResult{Scenario: sc.name, Jobs: []JobState{{Job: "train-a", Running: i}}}}
				}
				if tc.fails[i] != nil {
					steps[i] <- step{err: tc.fails[i]}
				}
				close(steps[i])
			}
			var out bytes.Buffer
			results, err := gather(&out, steps)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("gather: %v", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("gather: got error %v, want %q", err, tc.wantErr)
			}
			if got := strings.Count(out.String(), "SCHEDULER"); got != tc.wantTables {
				t.Errorf("printed %d tables, want %d:\n%s", got, tc.wantTables, out.String())
			}
			for i := 0; i < tc.wantTables; i++ {
				if !strings.Contains(out.String(), scenarios[i].title) {
					t.Errorf("table %d (%s) not printed", i, scenarios[i].name)
				}
				if i > 0 && strings.Index(out.String(), scenarios[i].title) < strings.Index(out.String(), scenarios[i-1].title) {
					t.Errorf("table %s printed before %s", scenarios[i].name, scenarios[i-1].name)
				}
			}
			if tc.wantErr != "" {
				return
			}
			for i, r := range results {
				if r.Mode != modes[i].name || len(r.Scenarios) != len(scenarios) {
					t.Fatalf("result %d: %s with %d scenarios, want %s with %d", i, r.Mode, len(r.Scenarios), modes[i].name, len(scenarios))
				}
				for j, s := range r.Scenarios {
					if s.Scenario != scenarios[j].name || s.Jobs[0].Running != i {
						t.Errorf("mode %s scenario %d: got %+v, want %s from that mode", r.Mode, j, s, scenarios[j].name)
					}
				}
			}
		})
	}
}
