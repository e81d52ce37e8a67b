// Package config embeds the manifests Lockstep installs: its CRDs (generated
// by controller-gen into crd/) and RBAC (rbac/), so `lockstep dev up` and
// the tests install exactly what a user would apply.
package config

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
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

// Kind is one of the kinds Lockstep's CRDs define, at the versions this
// release serves.
type Kind struct {
	Group, Kind, Resource string
	Versions              []string
}

// Kinds are the kinds of every CRD this release installs (what preflight
// checks the API server serves), in file order.
func Kinds() ([]Kind, error) {
	names, err := fs.Glob(files, "crd/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Kind
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		k := Kind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind, Resource: crd.Spec.Names.Plural}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				k.Versions = append(k.Versions, v.Name)
			}
		}
		out = append(out, k)
	}
	return out, nil
}
