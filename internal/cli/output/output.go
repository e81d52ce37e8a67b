// Package output is the -o flag of the commands that print: the formats a
// command accepts, refused before anything runs when unknown, and JSON and
// YAML printing of any value.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Flag is a command's -o: Format, one of the formats the command prints.
type Flag struct {
	Format  string
	formats []string
	// none says what the command prints without -o ("" if -o is required
	// to have a value).
	none string
}

// New is a -o taking formats; without -o the command prints none (e.g.
// "a table"). A non-empty def is the default format instead.
func New(def, none string, formats ...string) *Flag {
	return &Flag{Format: def, formats: formats, none: none}
}

// AddFlag registers -o/--output on fs.
func (f *Flag) AddFlag(fs *pflag.FlagSet) {
	usage := "output format: " + strings.Join(f.formats, ", ")
	if f.none != "" {
		usage += " (default: " + f.none + ")"
	}
	fs.StringVarP(&f.Format, "output", "o", f.Format, usage)
}

// Validate refuses a format the command does not print.
func (f *Flag) Validate() error {
	if f.Format == "" && f.none != "" || slices.Contains(f.formats, f.Format) {
		return nil
	}
	return fmt.Errorf("-o %q: not an output format of this command: use one of %s", f.Format, strings.Join(f.formats, ", "))
}

// Structured reports whether the format is json or yaml.
func (f *Flag) Structured() bool { return f.Format == "json" || f.Format == "yaml" }

// Print writes v as JSON or YAML (the flag's format must be one of them).
func (f *Flag) Print(out io.Writer, v any) error {
	switch f.Format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	return fmt.Errorf("-o %s is not a structured format", f.Format)
}
