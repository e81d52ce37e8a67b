package devcluster

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
)

//go:embed stages/*.yaml
var stageFiles embed.FS

// writeStages concatenates the kwok stages into the one config file kwok reads.
func writeStages(l layout) error {
	entries, err := stageFiles.ReadDir("stages")
	if err != nil {
		return err
	}
	var out []byte
	for _, e := range entries {
		b, err := stageFiles.ReadFile("stages/" + e.Name())
		if err != nil {
			return err
		}
		out = append(out, []byte("---\n")...)
		out = append(out, b...)
	}
	return os.WriteFile(l.path("kwok-stages.yaml"), out, 0o644)
}

func etcdHealthy(ctx context.Context, port int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url(port)+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &h); err != nil || h.Health != "true" {
		return fmt.Errorf("etcd /health: %s", b)
	}
	return nil
}

func apiReady(ctx context.Context, client kubernetes.Interface) error {
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/readyz: %w: %s", err, body)
	}
	return nil
}

// createObjects creates DeviceClasses, Nodes (with their capacity written
// through the status subresource) and ResourceSlices; objects that already
// exist are left alone, so the call can be retried.
func createObjects(ctx context.Context, client kubernetes.Interface, objs *clusterspec.Objects) error {
	for _, dc := range objs.DeviceClasses {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
	for _, n := range objs.Nodes {
		if err := createNode(ctx, client, n); err != nil {
			return err
		}
	}
	for _, s := range objs.ResourceSlices {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
		}
	}
	return nil
}

func createNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("Node %s: %w", n.Name, err)
	}
	if len(created.Status.Capacity) > 0 {
		return nil
	}
	created.Status.Capacity = n.Status.Capacity
	created.Status.Allocatable = n.Status.Allocatable
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("Node %s status: %w", n.Name, err)
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// clusterReady checks that every node is Ready with the not-ready taint
// lifted, every slice exists, and the default ServiceAccount exists (pods are
// rejected until it does).
func clusterReady(ctx context.Context, client kubernetes.Interface, objs *clusterspec.Objects) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for i := range nodes.Items {
		if NodeSchedulable(&nodes.Items[i]) {
			ready++
		}
	}
	if ready < len(objs.Nodes) {
		return fmt.Errorf("%d of %d nodes Ready and untainted", ready, len(objs.Nodes))
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(slices.Items) < len(objs.ResourceSlices) {
		return fmt.Errorf("%d of %d ResourceSlices exist", len(slices.Items), len(objs.ResourceSlices))
	}
	if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("default ServiceAccount: %w", err)
	}
	return nil
}

// NodeSchedulable reports whether a node is Ready and no longer carries the
// taints the control plane puts on nodes that are not (yet) ready.
func NodeSchedulable(n *corev1.Node) bool {
	readyCond := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			readyCond = true
		}
	}
	if !readyCond {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return true
}

// webhookReady: the webhook says it is ready — caches synced, serving, its
// CA injected into the configurations.
func webhookReady(ctx context.Context, port int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webhook /readyz: %s", resp.Status)
	}
	return nil
}
