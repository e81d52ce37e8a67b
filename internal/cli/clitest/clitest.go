// Package clitest helps the CLI's unit tests: kubeconfig files with chosen
// contexts, an environment where nothing but those files is a kubeconfig,
// and cobra's flag and argument parsing without running the command.
package clitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Context is one context of a kubeconfig written by Kubeconfig: its own
// cluster at Server, its namespace (may be empty).
type Context struct {
	Name, Server, Namespace string
}

// Kubeconfig writes a kubeconfig named name into a temporary directory with
// the contexts given, the current one being current ("" sets none), and
// returns its path.
func Kubeconfig(t testing.TB, name, current string, contexts ...Context) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, c := range contexts {
		cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Server}
		cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: "token-" + c.Name}
		cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: c.Namespace}
	}
	cfg.CurrentContext = current
	path := filepath.Join(t.TempDir(), name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Env makes $KUBECONFIG the only kubeconfig the test sees (kubeconfig is a
// list joined with the OS's separator, or a path that does not exist for
// none), and the test not a pod (no in-cluster configuration).
func Env(t *testing.T, kubeconfig string) {
	t.Setenv(clientcmd.RecommendedConfigPathEnvVar, kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

// List joins kubeconfig paths as $KUBECONFIG lists them.
func List(paths ...string) string { return strings.Join(paths, string(os.PathListSeparator)) }

// Missing is a kubeconfig path that does not exist.
func Missing(t testing.TB) string { return filepath.Join(t.TempDir(), "no-such-kubeconfig") }

// Parse parses argv as cobra would before running cmd — flags, then the
// command's argument rule — and returns the arguments left.
func Parse(cmd *cobra.Command, argv []string) ([]string, error) {
	if err := cmd.ParseFlags(argv); err != nil {
		return nil, err
	}
	args := cmd.Flags().Args()
	return args, cmd.ValidateArgs(args)
}

// CompleteValidate parses argv for cmd as cobra does, then runs complete
// and validate as the command's RunE does, stopping at the first error.
func CompleteValidate(cmd *cobra.Command, argv []string, complete func(args []string) error, validate func() error) error {
	args, err := Parse(cmd, argv)
	if err != nil {
		return err
	}
	if err := complete(args); err != nil {
		return err
	}
	return validate()
}

// WantErr checks err against the parts a wanted error must contain (none:
// no error is wanted). It returns true when the test has nothing more to
// check: an error was wanted, or one came.
func WantErr(t *testing.T, err error, parts []string) bool {
	t.Helper()
	switch {
	case len(parts) == 0 && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case len(parts) > 0 && err == nil:
		t.Fatalf("want an error with %q, got none", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
	return len(parts) > 0
}
