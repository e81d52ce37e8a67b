package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    *Flag
		format  string
		wantErr string
	}{
		{name: "no -o where the command has a default output", flag: New("", "a table", "json", "wide"), format: ""},
		{name: "a listed format", flag: New("", "a table", "json", "wide"), format: "wide"},
		{name: "a format the command does not print", flag: New("", "a table", "json", "wide"), format: "jsonpath={.x}",
			wantErr: `-o "jsonpath={.x}": not an output format of this command: use one of json, wide`},
		{name: "formats are case-sensitive, as kubectl's", flag: New("", "a table", "json"), format: "JSON",
			wantErr: `-o "JSON": not an output format of this command: use one of json`},
		{name: "an empty -o where a format is required", flag: New("table", "", "table", "json"), format: "",
			wantErr: `-o "": not an output format of this command: use one of table, json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.flag.Format = tc.format
			err := tc.flag.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	v := struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}{"train", 4}
	for _, tc := range []struct {
		format, want string
	}{
		{format: "json", want: "{\n  \"name\": \"train\",\n  \"count\": 4\n}\n"},
		{format: "yaml", want: "count: 4\nname: train\n"},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var out bytes.Buffer
			f := New("", "a table", "json", "yaml")
			f.Format = tc.format
			if err := f.Print(&out, v); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	f := New("", "a table", "wide")
	f.Format = "wide"
	if err := f.Print(&bytes.Buffer{}, v); err == nil || !strings.Contains(err.Error(), "not a structured format") {
		t.Errorf("Print with -o wide: want a refusal, got %v", err)
	}
}
