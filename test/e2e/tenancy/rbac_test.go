package tenancy

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var update = flag.Bool("update", false, "rewrite testdata/rbac/*.txt from the cluster")

// TestComponentRBAC: what each component may do, as `kubectl auth can-i
// --list` reports it for the identity it runs as, cluster-wide and in
// lockstep-system, is exactly the reviewed list in testdata/rbac (every rule
// justified in config/rbac and docs/admission.md). A widened role fails
// here until the list is updated (-update) and reviewed.
func TestComponentRBAC(t *testing.T) {
	h := harness.Get(t)
	for _, user := range []string{"lockstep-scheduler", "lockstep-controllers", "lockstep-webhook"} {
		t.Run(user, func(t *testing.T) {
			var got []string
			for _, ns := range []string{"default", "lockstep-system"} {
				out, err := exec.Command(filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig, "auth", "can-i", "--list", "--as", user, "-n", ns).CombinedOutput()
				if err != nil {
					t.Fatalf("kubectl auth can-i: %v\n%s", err, out)
				}
				got = append(got, rules(ns, string(out))...)
			}
			path := filepath.Join("testdata", "rbac", user+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it, then review it)", err)
			}
			want := strings.Split(strings.TrimSpace(string(b)), "\n")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s may do something else than the reviewed list (-want,+got):\n%s", user, diff)
			}
		})
	}
	for _, tc := range []struct {
		user, verb, resource, ns string
	}{
		{"lockstep-scheduler", "create", "pods", "default"},
		{"lockstep-scheduler", "update", "pods", "default"},
		{"lockstep-scheduler", "get", "secrets", "lockstep-system"},
		{"lockstep-controllers", "create", "pods", "default"},
		{"lockstep-controllers", "patch", "pods", "default"},
		{"lockstep-controllers", "update", "jobs.batch", "default"},
		{"lockstep-webhook", "delete", "pods", "default"},
		{"lockstep-webhook", "get", "secrets", "default"},
		{"lockstep-webhook", "update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-else", ""},
		{"lockstep-webhook", "create", "mutatingwebhookconfigurations.admissionregistration.k8s.io", ""},
		{"lockstep-webhook", "create", "validatingwebhookconfigurations.admissionregistration.k8s.io", ""},
		{"lockstep-webhook", "update", "validatingwebhookconfigurations.admissionregistration.k8s.io/lockstep", ""},
		{"lockstep-webhook", "create", "secrets", "lockstep-system"},
		{"lockstep-webhook", "patch", "validatingadmissionpolicies.admissionregistration.k8s.io/lockstep-webhook-ca-injection", ""},
		{"lockstep-webhook", "delete", "validatingadmissionpolicies.admissionregistration.k8s.io/lockstep-webhook-ca-injection", ""},
		{"lockstep-webhook", "delete", "validatingadmissionpolicybindings.admissionregistration.k8s.io/lockstep-webhook-ca-injection", ""},
		{"lockstep-webhook", "create", "validatingadmissionpolicybindings.admissionregistration.k8s.io", ""},
	} {
		args := []string{"--kubeconfig", h.Kubeconfig, "auth", "can-i", tc.verb, tc.resource, "--as", tc.user}
		if tc.ns != "" {
			args = append(args, "-n", tc.ns)
		}
		out, _ := exec.Command(filepath.Join(h.BinDir, "kubectl"), args...).Output() // stdout: yes or no
		if answer := strings.TrimSpace(string(out)); answer != "no" {
			t.Errorf("%s can %s %s: %s", tc.user, tc.verb, tc.resource, answer)
		}
	}
}

// rules turns `can-i --list` output into sorted "ns resource names verbs"
// lines, without the discovery rules every identity has.
func rules(ns, out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "[/") || strings.HasPrefix(f[0], "self") {
			continue
		}
		line := strings.Join(f, " ")
		// The verbs of rules merged from several roles come in no fixed
		// order: sorted.
		if i := strings.LastIndex(line, " ["); i >= 0 && strings.HasSuffix(line, "]") {
			verbs := strings.Fields(strings.Trim(line[i+1:], "[]"))
			sort.Strings(verbs)
			line = line[:i] + " [" + strings.Join(verbs, " ") + "]"
		}
		lines = append(lines, ns+" "+line)
	}
	sort.Strings(lines)
	return lines
}

// TestWebhookPatchIsConfinedToTheCABundle: on the local control plane too
// (the webhook runs as its client-certificate user), the CA-injection
// policy lets the webhook's identity change a configuration's caBundle and
// nothing else: server-side dry runs as that user.
func TestWebhookPatchIsConfinedToTheCABundle(t *testing.T) {
	h := harness.Get(t)
	patch := func(p string) (string, error) {
		out, err := exec.Command(filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig, "--as", "lockstep-webhook",
			"patch", "validatingwebhookconfiguration", "lockstep", "--type=json", "-p", p, "--dry-run=server").CombinedOutput()
		return string(out), err
	}
	for name, p := range map[string]string{
		"rules matching every resource": `[{"op":"replace","path":"/webhooks/0/rules","value":[{"apiGroups":["*"],"apiVersions":["*"],"resources":["*"],"operations":["*"],"scope":"*"}]}]`,
		"an external URL":               `[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://collector.example.com/admission"}]`,
	} {
		if out, err := patch(p); err == nil || !strings.Contains(out, "lockstep-webhook-ca-injection") {
			t.Errorf("%s as lockstep-webhook: want a refusal by the CA-injection policy, got %v: %s", name, err, out)
		}
	}
	if out, err := patch(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"Y2EK"}]`); err != nil {
		t.Errorf("a new caBundle as lockstep-webhook: want it admitted, got %v: %s", err, out)
	}
}
