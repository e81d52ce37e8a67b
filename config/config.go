// Package config embeds the manifests Lockstep installs: its CRDs (generated
// by controller-gen into crd/) and RBAC (rbac/), so `lockstep dev up` and
// the tests install exactly what a user would apply.
package config

import (
	"bytes"
	"embed"
	"io/fs"
	"sort"
)

//go:embed crd/*.yaml rbac/*.yaml
var files embed.FS

// Manifests returns every manifest, CRDs first, as one multi-document YAML
// stream per file.
func Manifests() ([][]byte, error) {
	var out [][]byte
	for _, dir := range []string{"crd", "rbac"} {
		names, err := fs.Glob(files, dir+"/*.yaml")
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		for _, n := range names {
			b, err := files.ReadFile(n)
			if err != nil {
				return nil, err
			}
			out = append(out, bytes.Clone(b))
		}
	}
	return out, nil
}
