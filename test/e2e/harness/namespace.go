package harness

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Context returns a context that ends after timeout or when the test ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace for the test, waits until pods can be
// created in it, and deletes it when the test ends — after dumping its
// objects and the component logs if the test failed.
func (h *Harness) Namespace(t testing.TB) string {
	t.Helper()
	prefix := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	ctx := Context(t, time.Minute)
	ns, err := h.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(prefix, "-") + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if h.Cluster != nil {
			if err := h.Cluster.Failed(); err != nil {
				t.Errorf("a control-plane component died during the test: %v", err)
			}
		}
		if t.Failed() {
			h.Dump(t, ns.Name)
		}
		h.deleteNamespace(t, ns.Name)
	})
	// Pods are rejected until the namespace's default ServiceAccount exists.
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := h.Client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: default ServiceAccount never appeared: %v", ns.Name, err)
	}
	return ns.Name
}

// Eventually polls cond every 200ms until it returns true, fails the test
// with the last reason when ctx ends. cond returns (done, reason-if-not).
func Eventually(t testing.TB, ctx context.Context, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var reason string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		done, why, err := cond(ctx)
		reason = why
		return done, err
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %s)", what, err, reason)
	}
}

// Dump logs the namespace's pods, claims and events, the nodes, and of every
// component log the tail and the lines that name the namespace (what each
// component did to the test's objects, however long ago).
func (h *Harness) Dump(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	dumpObjects(ctx, &b, h.Client, ns)
	if h.Cluster != nil {
		for _, name := range h.Cluster.Components() {
			fmt.Fprintf(&b, "--- %s log (last 40 lines) ---\n%s\n", name, h.Cluster.LogTail(name, 40))
			if lines := h.Cluster.LogLines(name, ns+"/", 200); lines != "" && !strings.HasPrefix(lines, "(no log") {
				fmt.Fprintf(&b, "--- %s log, lines naming %s/ (last 200) ---\n%s\n", name, ns, lines)
			}
		}
	}
	t.Logf("dump of namespace %s:\n%s", ns, b.String())
	if path := os.Getenv("LOCKSTEP_E2E_DUMP_DIR"); path != "" {
		_ = os.WriteFile(path+"/"+ns+".txt", []byte(b.String()), 0o644)
	}
}

func dumpObjects(ctx context.Context, b *strings.Builder, c kubernetes.Interface, ns string) {
	if pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(b, "pods (%d):\n", len(pods.Items))
		for _, p := range pods.Items {
			fmt.Fprintf(b, "  %s uid=%s created=%s phase=%s node=%q scheduler=%s group=%q claims=%v\n", p.Name, p.UID, p.CreationTimestamp.Format(time.RFC3339), p.Status.Phase, p.Spec.NodeName, p.Spec.SchedulerName, p.Labels[lockv1.PodGroupLabel], p.Status.ResourceClaimStatuses)
			if p.DeletionTimestamp != nil || len(p.Finalizers) > 0 {
				fmt.Fprintf(b, "    deleting since %v, finalizers %v\n", p.DeletionTimestamp, p.Finalizers)
			}
			for _, c := range p.Status.Conditions {
				fmt.Fprintf(b, "    %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	if claims, err := c.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(b, "resourceclaims (%d):\n", len(claims.Items))
		for _, rc := range claims.Items {
			alloc := "unallocated"
			if a := rc.Status.Allocation; a != nil {
				var devs []string
				for _, r := range a.Devices.Results {
					devs = append(devs, r.Pool+"/"+r.Device)
				}
				alloc = strings.Join(devs, ",")
			}
			fmt.Fprintf(b, "  %s %s reservedFor=%d\n", rc.Name, alloc, len(rc.Status.ReservedFor))
		}
	}
	if evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		sort.Slice(evs.Items, func(i, j int) bool { return evs.Items[i].LastTimestamp.Before(&evs.Items[j].LastTimestamp) })
		fmt.Fprintf(b, "events (%d):\n", len(evs.Items))
		for _, e := range evs.Items {
			fmt.Fprintf(b, "  %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	if nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		fmt.Fprintf(b, "nodes (%d):\n", len(nodes.Items))
		for _, n := range nodes.Items {
			fmt.Fprintf(b, "  %s taints=%v unschedulable=%v\n", n.Name, n.Spec.Taints, n.Spec.Unschedulable)
		}
	}
}

// deleteNamespace deletes the namespace and waits until it is gone, so the
// capacity its pods held (GPUs above all) is free for the next test.
func (h *Harness) deleteNamespace(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := h.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Logf("deleting namespace %s: %v", ns, err)
		return
	}
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := h.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Logf("namespace %s still terminating after 90s", ns)
	}
}
