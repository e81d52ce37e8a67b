package install

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const releaseNS = "lockstep-chart"

// TestChartInstallsAWorkingLockstep is the whole install: render, apply,
// run as the chart's identities, win seed 004, upgrade, uninstall.
func TestChartInstallsAWorkingLockstep(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 8*time.Minute)
	if _, err := h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rendered := render(t, h, "--set", "logLevel=2")
	kubectl(t, h, rendered, "apply", "--server-side", "-f", "-")
	base := harness.FreeBasePort()
	webhookPort := base
	pointWebhooksAt(t, ctx, h, "https://127.0.0.1:"+strconv.Itoa(webhookPort))

	// start runs a component as the chart's ServiceAccount; it returns the
	// kubeconfig it runs with and a function that stops it.
	start := func(component string, args ...string) (string, func()) {
		kc := serviceAccountKubeconfig(t, ctx, h, "lockstep-"+component)
		return kc, run(t, h, component, append([]string{component, "--kubeconfig=" + kc, "-v=2"}, args...)...)
	}
	webhookArgs := []string{"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(webhookPort), "--url-host=127.0.0.1:" + strconv.Itoa(webhookPort),
		"--cert-dir=" + t.TempDir(), "--secret-namespace=" + releaseNS, "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(base+1), "--metrics-bind-address=0"}
	webhookKubeconfig, stopWebhook := start("webhook", webhookArgs...)
	// Ready means the webhook injected its CA as the chart's ServiceAccount,
	// through the CA-injection policy.
	waitReady(t, ctx, base+1)
	webhookConfinedToCABundle(t, ctx, h, webhookKubeconfig)
	start("controllers", "--leader-elect-namespace="+releaseNS, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(base+2))
	start("scheduler", "--leader-elect-namespace="+releaseNS, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(base+3))
	waitReady(t, ctx, base+2)
	waitReady(t, ctx, base+3)

	// Seed 004: two 4-rank GPU Jobs on 6 GPUs.
	ns := h.Namespace(t)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train-a", "train-b"} {
		job := builders.IndexedJob(ns, name, 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj())
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		})
	}
	harness.Eventually(t, ctx, "one gang 4/4, the other 0/4", func(ctx context.Context) (bool, string, error) {
		var counts []int
		for _, g := range []string{"train-a", "train-b"} {
			_, bound, err := h.GroupPods(ctx, ns, g)
			if err != nil {
				return false, "", err
			}
			counts = append(counts, bound)
		}
		ok := counts[0]+counts[1] == 4 && (counts[0] == 4 || counts[1] == 4)
		return ok, fmt.Sprintf("bound %v", counts), nil
	})
	time.Sleep(3 * time.Second)
	for _, g := range []string{"train-a", "train-b"} {
		if _, bound, _ := h.GroupPods(ctx, ns, g); bound != 0 && bound != 4 {
			t.Errorf("%s partially bound: %d of 4", g, bound)
		}
	}

	// Upgrade: changed values, applied over the running install (the
	// webhook configurations, pointed at the process here, render the same
	// for both values and are left as they are).
	upgraded := render(t, h, "--set", "logLevel=4,scheduler.kubeAPIQPS=300,controllers.nodeNotReadyGrace=90s")
	if a, b := only(t, rendered, isWebhookConfiguration), only(t, upgraded, isWebhookConfiguration); !bytes.Equal(a, b) {
		t.Errorf("the webhook configurations render differently for the upgrade's values")
	}
	kubectl(t, h, without(t, upgraded, isWebhookConfiguration), "apply", "--server-side", "-f", "-")
	d, err := h.Client.AppsV1().Deployments(releaseNS).Get(ctx, "lockstep-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--kube-api-qps=300") || !strings.Contains(args, "-v=4") {
		t.Errorf("upgrade did not change the scheduler's arguments: %s", args)
	}

	// A CA rotation still works: a webhook that finds no CA in its Secret
	// makes a new one and injects it, as the chart's ServiceAccount.
	stopWebhook()
	rotateCA(t, ctx, h, func() { start("webhook", webhookArgs...); waitReady(t, ctx, base+1) })

	// Uninstall: everything the chart created goes but the CRDs (Helm 3
	// installs crds/ once and never deletes them).
	kubectl(t, h, without(t, upgraded, isCRD), "delete", "--wait=true", "-f", "-")
	left := leftovers(t, ctx, h, upgraded)
	if len(left) > 0 {
		t.Errorf("uninstall left %v", left)
	}
	for _, crd := range []string{"podgroups.scheduling.lockstep.dev", "workloads.scheduling.lockstep.dev"} {
		if _, err := h.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(ctx, crd, metav1.GetOptions{}); err != nil {
			t.Errorf("CRD %s must stay after uninstall: %v", crd, err)
		}
	}
}

// render runs `helm template` on the chart, CRDs included.
func render(t *testing.T, h *harness.Harness, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.BinDir, "helm"), append([]string{"template", "lockstep", filepath.Join(h.RepoRoot, "charts", "lockstep"),
		"--namespace", releaseNS, "--include-crds", "--kube-version", "1.37.2"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return out
}

func kubectl(t *testing.T, h *harness.Harness, stdin []byte, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.BinDir, "kubectl"), append([]string{"--kubeconfig", h.Kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// docs splits rendered YAML into objects.
func docs(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func isCRD(u *unstructured.Unstructured) bool { return u.GetKind() == "CustomResourceDefinition" }

func isWebhookConfiguration(u *unstructured.Unstructured) bool {
	return u.GetKind() == "MutatingWebhookConfiguration" || u.GetKind() == "ValidatingWebhookConfiguration"
}

// without and only filter rendered YAML into a JSON stream.
func without(t *testing.T, b []byte, drop func(*unstructured.Unstructured) bool) []byte {
	t.Helper()
	return filter(t, b, func(u *unstructured.Unstructured) bool { return !drop(u) })
}

func only(t *testing.T, b []byte, keep func(*unstructured.Unstructured) bool) []byte {
	t.Helper()
	return filter(t, b, keep)
}

func filter(t *testing.T, b []byte, keep func(*unstructured.Unstructured) bool) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, u := range docs(t, b) {
		if !keep(u) {
			continue
		}
		j, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(j)
		out.WriteString("\n")
	}
	return out.Bytes()
}

// leftovers are the rendered objects (but CRDs) that still exist.
func leftovers(t *testing.T, ctx context.Context, h *harness.Harness, b []byte) []string {
	t.Helper()
	var left []string
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(h.Client.Discovery()))
	for _, u := range docs(t, b) {
		if isCRD(u) {
			continue
		}
		gvk := u.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		ri := h.Dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace())
		if _, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, u.GetKind()+"/"+u.GetName())
		}
	}
	return left
}

// pointWebhooksAt replaces the Service in the installed webhook
// configurations' clientConfig with a URL (there is no pod network).
func pointWebhooksAt(t *testing.T, ctx context.Context, h *harness.Harness, base string) {
	t.Helper()
	for _, res := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: res}
		u, err := h.Dynamic.Resource(gvr).Get(ctx, "lockstep", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		var patch []string
		for i, w := range hooks {
			path, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "service", "path")
			patch = append(patch, fmt.Sprintf(`{"op":"remove","path":"/webhooks/%d/clientConfig/service"},{"op":"add","path":"/webhooks/%d/clientConfig/url","value":%q}`, i, i, base+path))
		}
		if _, err := h.Dynamic.Resource(gvr).Patch(ctx, "lockstep", types.JSONPatchType, []byte("["+strings.Join(patch, ",")+"]"), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// chart's ServiceAccount with a token from the TokenRequest API.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, h *harness.Harness, sa string) string {
	t.Helper()
	tr, err := h.Client.CoreV1().ServiceAccounts(releaseNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s: %v", sa, err)
	}
	admin, err := clientcmd.LoadFromFile(h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa}
	cfg.CurrentContext = sa
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// run starts a lockstep component; it is killed when the test ends, or
// when the function it returns is called.
func run(t *testing.T, h *harness.Harness, name string, args ...string) func() {
	t.Helper()
	logPath := filepath.Join(h.Cluster.Dir(), "logs", "chart-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logf.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s log ---\n%s", name, tailLines(string(b), 30))
		}
	})
	return stop
}

func waitReady(t *testing.T, ctx context.Context, port int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("/readyz on %d", port), func(ctx context.Context) (bool, string, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK, string(body), nil
	})
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
