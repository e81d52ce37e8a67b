// Package plugin checks the krew plugin manifest (.krew.yaml) with krew's
// own tools: hack/plugin packages kubectl-lockstep and renders the manifest,
// validate-krew-manifest checks it, and krew installs it and the installed
// plugin answers as `kubectl lockstep` with the user commands only.
package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

func TestKrewManifest(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	out := t.TempDir()
	// Every archive holds this machine's build (`make plugin` packs each
	// platform's own); the manifest, its checksums and the linux/amd64
	// install are what is checked.
	args := []string{"run", "./hack/plugin", "-tag", "v0.0.0-test", "-out", out}
	for _, p := range platforms {
		args = append(args, p+"="+filepath.Join(bin, "kubectl-lockstep"))
	}
	run(t, root, nil, "go", args...)
	manifest := filepath.Join(out, "lockstep.yaml")
	// validate-krew-manifest takes the plugin's name from the file's.
	run(t, root, nil, filepath.Join(bin, "validate-krew-manifest"), "-manifest", manifest, "-skip-install")

	krewRoot := t.TempDir()
	env := []string{"KREW_ROOT=" + krewRoot, "KREW_OS=linux", "KREW_ARCH=amd64", "HOME=" + t.TempDir()}
	run(t, root, env, filepath.Join(bin, "krew"), "install", "--manifest="+manifest, "--archive="+filepath.Join(out, "kubectl-lockstep_linux_amd64.tar.gz"))
	if _, err := os.Stat(filepath.Join(krewRoot, "receipts", "lockstep.yaml")); err != nil {
		t.Errorf("krew recorded no receipt for lockstep: %v", err)
	}
	help := run(t, root, nil, filepath.Join(krewRoot, "bin", "kubectl-lockstep"), "--help")
	if !strings.Contains(help, "kubectl lockstep [command]") {
		t.Errorf("the plugin's help does not say `kubectl lockstep`:\n%s", help)
	}
	for _, c := range []string{"explain", "get", "preflight", "version"} {
		if !strings.Contains(help, "\n  "+c+" ") {
			t.Errorf("the plugin lacks %s:\n%s", c, help)
		}
	}
	for _, c := range []string{"scheduler", "webhook", "controllers", "dev", "demo"} {
		if strings.Contains(help, "\n  "+c+" ") {
			t.Errorf("the plugin carries the operator command %s:\n%s", c, help)
		}
	}
	if _, err := os.Stat(filepath.Join(krewRoot, "store", "lockstep", "v0.0.0-test", "LICENSE")); err != nil {
		t.Errorf("the LICENSE was not installed with the plugin: %v", err)
	}
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}
