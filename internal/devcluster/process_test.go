package devcluster

import (
	"os"
	"testing"
)

// A component's log lines are read whole or only those naming something,
// the last n of them.
func TestLogLines(t *testing.T) {
	p := &process{Log: t.TempDir() + "/kwok.log"}
	log := "a ns-1/w-0 created\nb ns-2/w-0 created\nc ns-1/w-0 patched\nd other\n"
	if err := os.WriteFile(p.Log, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		match string
		n     int
		want  string
	}{
		{"", 2, "c ns-1/w-0 patched\nd other"},
		{"ns-1/", 5, "a ns-1/w-0 created\nc ns-1/w-0 patched"},
		{"ns-1/", 1, "c ns-1/w-0 patched"},
		{"ns-3/", 5, ""},
	} {
		if got := p.logLines(tc.match, tc.n); got != tc.want {
			t.Errorf("logLines(%q, %d) = %q, want %q", tc.match, tc.n, got, tc.want)
		}
	}
}
