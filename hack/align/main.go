// Command align keeps the modules the build compiles at one version where
// they can share it, so that Go's build cache compiles each package once for
// every binary `make build` and `make test` need rather than once per module
// that pins its own version of it (`make align` writes; `make verify` runs
// it with -check and fails on a difference).
//
// The modules are Lockstep's own (.), the Kubernetes binaries' (hack/k8s),
// the dev tools' (hack/tools, hack/krew), the real node's runtime (hack/node)
// and each peer controller's (hack/integrations/<name>). A package is shared
// in the cache only when every module beneath it is at the same version in
// both builds, so align works from the bottom of the graph:
//
//   - a foundation module (anything but the Kubernetes project's own libraries
//     and the modules built on them) is raised to the highest version any of
//     them uses, in every one that uses it: these are Go's x/ libraries,
//     protobuf, gRPC, Prometheus' client, OpenTelemetry, CEL, klog, k8s.io/utils
//     and their like, which keep Go's compatibility promise across minor versions;
//   - a Kubernetes library (k8s.io/api, client-go, controller-runtime, …) is
//     raised only to the highest patch of the minor version the module already
//     uses: a peer built on client-go v0.35 is never moved to v0.37, whose API
//     it was not written against.
//
// Versions are only ever raised (Go's minimal version selection cannot lower
// one by a requirement), modules a go.mod replaces by another version of
// themselves are built at the replace's version, and only their requirement is
// raised to the highest among the units building that version (with -trimpath
// Go's build cache keys a package by it too).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	modpath "golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// stacks names, per unit, the unit whose Kubernetes libraries it builds with
// instead of the highest patch of its own minor version: a controller whose
// code compiles with a newer client-go and controller-runtime, and passes its
// e2e package with them, then shares them in the cache with that unit. It
// takes that unit's version of every other module built on Kubernetes they
// both use too (a peer's API types), which is written for those libraries. The
// others' code no longer compiles with the next minor (controller-runtime
// v0.23's webhook builder, client-go v0.35's watch error handler, k8s.io/api
// v0.37's removed types), so they keep their own.
var stacks = map[string]string{
	"hack/integrations/karpenter": ".",                     // v1.14, on client-go v0.35: passes on Lockstep's v0.37
	"hack/integrations/jobset":    ".",                     // v0.12.0, on client-go v0.36: passes on Lockstep's v0.37
	"hack/integrations/lws":       "hack/integrations/ray", // v0.7.0, on client-go v0.33: passes on KubeRay's v0.34
	// v0.17.0, on client-go v0.35: passes on Trainer's v0.36 and Trainer's v2.3.0 API (the
	// v2.2.0 API it requires uses types k8s.io/api v0.36 removed; v0.37 is out of reach while
	// v2.3.0's uses types v0.37 removed)
	"hack/integrations/kueue": "hack/integrations/trainer",
	// v1.9.4, on client-go v0.36 and controller-runtime v0.24.1: Trainer's own
	"hack/integrations/training": "hack/integrations/trainer",
}

// kubernetesLibrary reports whether a module is one of the Kubernetes
// project's libraries that move together with Kubernetes' minor versions, or
// one kept with them because older ones do not compile with its newer versions.
func kubernetesLibrary(path string) bool {
	if kubernetesProject(path) {
		return true
	}
	switch {
	case path == "github.com/google/gnostic-models":
		// kube-openapi's OpenAPI documents: v0.7 moved to go.yaml.in/yaml/v3, which
		// the kube-openapi of client-go v0.33 and before does not compile with.
		return true
	case strings.HasPrefix(path, "go.opentelemetry.io/contrib/"):
		// k8s.io/apiserver's tracing: the gRPC interceptors k8s.io/apiserver v0.31
		// calls are gone from later otelgrpc versions.
		return true
	}
	return false
}

// kubernetesProject reports whether a module is one of the Kubernetes
// project's own libraries with Kubernetes API in them. A module that requires
// one is built on Kubernetes; one that only requires OpenTelemetry's contrib
// (gRPC requires its GCP detector) is not, and is a foundation.
func kubernetesProject(path string) bool {
	switch path {
	case "k8s.io/klog/v2", "k8s.io/utils", "sigs.k8s.io/json", "sigs.k8s.io/yaml", "sigs.k8s.io/randfill":
		return false // foundations with no Kubernetes API in them
	}
	return strings.HasPrefix(path, "k8s.io/") || strings.HasPrefix(path, "sigs.k8s.io/")
}

type module struct {
	Path    string
	Version string // the version built: a replacement's when a go.mod replaces it by another version
	// Required is the version the build list selects before a replace (load
	// sets it to Version when nothing replaces it). With -trimpath, which every
	// build here uses, Go's build cache keys a package by it too, so two units
	// that build a module at the same version share its packages only when
	// they also require it at the same version (k8s.io/kubernetes requires its
	// staging modules at v0.0.0, a library may require them at its own release).
	Required string
	// pinned is set when the go.mod replaces only the version it requires
	// (p v0.0.0 => …): raising the requirement would escape the replace.
	pinned  bool
	Main    bool
	Replace *module
}

type unit struct {
	dir string
	// modules are those the unit's go.mod requires, which after `go mod tidy`
	// are the ones that provide a package to its build, at the versions built.
	modules map[string]module
	// kubernetesBased are the modules that are, or directly require, a
	// Kubernetes library (kubernetesLibrary): API types, operators, clients.
	kubernetesBased map[string]bool
	// builds are the modules of the programs the unit builds (its tools.go
	// imports): a peer's controller, whose version its go.mod alone chooses.
	builds map[string]bool
}

func main() {
	check := flag.Bool("check", false, "report the modules not aligned and exit 1 instead of writing go.mod files")
	flag.Parse()
	dirs := []string{".", "hack/k8s", "hack/tools", "hack/krew", "hack/node"}
	peers, err := filepath.Glob("hack/integrations/*/go.mod")
	if err != nil {
		fail(err)
	}
	for _, p := range peers {
		dirs = append(dirs, filepath.Dir(p))
	}
	for round := 1; ; round++ {
		units := make([]unit, 0, len(dirs))
		for _, d := range dirs {
			u, err := load(d)
			if err != nil {
				fail(err)
			}
			units = append(units, u)
		}
		changes := plan(units)
		if len(changes) == 0 {
			fmt.Println("every module the build compiles is aligned")
			return
		}
		if *check {
			for _, d := range slices.Sorted(maps.Keys(changes)) {
				for _, c := range changes[d] {
					fmt.Fprintf(os.Stderr, "%s: %s\n", d, c)
				}
			}
			fail(fmt.Errorf("modules not aligned: run `make align` and commit the go.mod and go.sum files it changes"))
		}
		if round > 4 {
			fail(fmt.Errorf("versions still moving after %d rounds: %v", round-1, changes))
		}
		for _, d := range slices.Sorted(maps.Keys(changes)) {
			args := []string{"mod", "edit"}
			for _, c := range changes[d] {
				args = append(args, "-require="+c)
			}
			fmt.Printf("%s: %s\n", d, strings.Join(changes[d], " "))
			if err := run(d, "go", args...); err != nil {
				fail(err)
			}
			if err := run(d, "go", "mod", "tidy"); err != nil {
				fail(err)
			}
		}
	}
}

// plan returns, per unit directory, the requirements (path@version) that
// bring it to the aligned versions.
func plan(units []unit) map[string][]string {
	highest := map[string]string{}
	// highestRequired is, per module built at one version (path@version), the
	// highest version any unit requires it at: a unit that builds it without
	// a replace requires the version it builds.
	highestRequired := map[string]string{}
	for _, u := range units {
		for p, m := range u.modules {
			if v, ok := highest[p]; !ok || semver.Compare(m.Version, v) > 0 {
				highest[p] = m.Version
			}
			k := p + "@" + m.Version
			if v, ok := highestRequired[k]; !ok || semver.Compare(m.Required, v) > 0 {
				highestRequired[k] = m.Required
			}
		}
	}
	byDir := map[string]unit{}
	for _, u := range units {
		byDir[u.dir] = u
	}
	changes := map[string][]string{}
	for _, u := range units {
		for _, p := range slices.Sorted(maps.Keys(u.modules)) {
			m := u.modules[p]
			if m.Replace != nil {
				// The replace decides what is built; the requirement is only raised
				// to the others' so that the cache shares it.
				if want := highestRequired[p+"@"+m.Version]; !m.pinned && semver.Compare(want, m.Required) > 0 {
					changes[u.dir] = append(changes[u.dir], p+"@"+want)
				}
				continue
			}
			want := highest[p]
			if u.kubernetesBased[p] {
				want = highestPatch(units, u, p, m.Version)
				// A stack lends its libraries and APIs, not its version of the
				// controller the unit builds (the stack unit may require that
				// module too, for its API types).
				if ref, ok := byDir[stacks[u.dir]]; ok && !u.builds[p] {
					if r, ok := ref.modules[p]; ok && semver.Compare(r.Version, want) > 0 {
						want = r.Version
					}
				}
			}
			if semver.Compare(want, m.Version) > 0 {
				changes[u.dir] = append(changes[u.dir], p+"@"+want)
			}
		}
	}
	return changes
}

// highestPatch is the highest version of module p, among the units that use
// it, with the same major and minor version as v, which unit in builds. A
// module with no releases (kube-openapi: a pseudo-version, which says
// nothing of the Kubernetes minor it was written for) is raised instead to
// the highest any unit uses whose Kubernetes (k8s.io/apimachinery) has in's
// minor.
func highestPatch(units []unit, in unit, p, v string) string {
	pseudo := modpath.IsPseudoVersion(v)
	minor := semver.MajorMinor(in.modules[kubernetesMinorOf].Version)
	want := v
	for _, u := range units {
		m, ok := u.modules[p]
		if !ok || semver.Compare(m.Version, want) <= 0 {
			continue
		}
		if pseudo {
			// A pseudo-version on a release (v1.13.1-0.…) stays on that release's minor.
			if modpath.IsPseudoVersion(m.Version) && semver.MajorMinor(m.Version) == semver.MajorMinor(v) &&
				minor != "" && semver.MajorMinor(u.modules[kubernetesMinorOf].Version) == minor {
				want = m.Version
			}
			continue
		}
		if semver.MajorMinor(m.Version) == semver.MajorMinor(v) && semver.Prerelease(m.Version) == "" {
			want = m.Version
		}
	}
	return want
}

// kubernetesMinorOf is the module whose minor version says which Kubernetes
// minor a unit is built on.
const kubernetesMinorOf = "k8s.io/apimachinery"

// load reads the module in dir: what its go.mod requires, at the versions
// its build list selects, and which of them are built on Kubernetes.
func load(dir string) (unit, error) {
	edit, err := output(dir, "go", "mod", "edit", "-json")
	if err != nil {
		return unit{}, err
	}
	var gomod struct {
		Require []module
		Replace []struct{ Old module }
	}
	if err := json.Unmarshal(edit, &gomod); err != nil {
		return unit{}, fmt.Errorf("%s: go.mod: %v", dir, err)
	}
	required := map[string]bool{}
	for _, r := range gomod.Require {
		required[r.Path] = true
	}
	pinned := map[string]bool{}
	for _, r := range gomod.Replace {
		if r.Old.Version != "" {
			pinned[r.Old.Path] = true
		}
	}
	graph, err := output(dir, "go", "mod", "graph")
	if err != nil {
		return unit{}, err
	}
	u := unit{dir: dir, modules: map[string]module{}, kubernetesBased: kubernetesBased(string(graph))}
	if u.builds, err = builds(dir, required); err != nil {
		return unit{}, err
	}
	list, err := output(dir, "go", "list", "-m", "-json", "all")
	if err != nil {
		return unit{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(list))
	for dec.More() {
		var m module
		if err := dec.Decode(&m); err != nil {
			return unit{}, fmt.Errorf("%s: %v", dir, err)
		}
		if m.Replace != nil {
			if m.Replace.Path != m.Path || m.Replace.Version == "" {
				continue // a fork or a local directory: not the module the others build
			}
			m.Required, m.Version, m.pinned = m.Version, m.Replace.Version, pinned[m.Path]
		} else {
			m.Required = m.Version
		}
		if m.Version == "" || m.Main || !required[m.Path] {
			continue
		}
		if kubernetesLibrary(m.Path) {
			u.kubernetesBased[m.Path] = true
		}
		u.modules[m.Path] = m
	}
	return u, nil
}

// builds returns the required modules that provide the packages dir's
// tools.go imports (none without one): each import's longest module path.
func builds(dir string, required map[string]bool) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "tools.go"), nil, parser.ImportsOnly)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mods := map[string]bool{}
	for _, imp := range f.Imports {
		pkg, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		best := ""
		for p, ok := range required {
			if ok && (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > len(best) {
				best = p
			}
		}
		if best != "" {
			mods[best] = true
		}
	}
	return mods, nil
}

// kubernetesBased are the modules of a module graph (`go mod graph`) that
// are a Kubernetes library or require one of the Kubernetes project's own.
func kubernetesBased(graph string) map[string]bool {
	based := map[string]bool{}
	for _, line := range strings.Split(graph, "\n") {
		from, to, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		from, _, _ = strings.Cut(from, "@")
		to, _, _ = strings.Cut(to, "@")
		if kubernetesLibrary(from) || kubernetesProject(to) {
			based[from] = true
		}
	}
	return based
}

func output(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %v: %s", dir, name, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %s %s: %v", dir, name, strings.Join(args, " "), err)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "align:", err)
	os.Exit(1)
}
