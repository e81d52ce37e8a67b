package typename

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    []Ref
		wantErr string
	}{
		{name: "TYPE", args: []string{"PodGroups"}, want: []Ref{{Type: "podgroups"}}},
		{name: "TYPE NAME", args: []string{"Job", "Train"}, want: []Ref{{Type: "job", Name: "Train"}}},
		{name: "TYPE NAME NAME", args: []string{"pg", "a", "b"}, want: []Ref{{Type: "pg", Name: "a"}, {Type: "pg", Name: "b"}}},
		{name: "TYPE/NAME", args: []string{"JobSet/llama"}, want: []Ref{{Type: "jobset", Name: "llama"}}},
		{name: "TYPE/NAME TYPE/NAME", args: []string{"pg/a", "podgroup/b"}, want: []Ref{{Type: "pg", Name: "a"}, {Type: "podgroup", Name: "b"}}},
		{name: "nothing", args: nil, wantErr: "no resource given: pass TYPE NAME or TYPE/NAME"},
		{name: "TYPE/ without a name", args: []string{"pg/"}, wantErr: `"pg/": want TYPE/NAME, e.g. podgroup/train`},
		{name: "/NAME without a type", args: []string{"/train"}, wantErr: `"/train": want TYPE/NAME, e.g. podgroup/train`},
		{name: "two slashes", args: []string{"pg/a/b"}, wantErr: `"pg/a/b": want TYPE/NAME, e.g. podgroup/train`},
		{name: "TYPE/NAME then NAME", args: []string{"pg/a", "b"}, wantErr: `"b" after "pg/a": pass every resource as TYPE/NAME, or TYPE NAME NAME… with the type once`},
		{name: "TYPE then TYPE/NAME", args: []string{"pg", "pg/a"}, wantErr: `"pg/a" after the type "pg": pass TYPE NAME, or TYPE/NAME without a separate type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.args)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
