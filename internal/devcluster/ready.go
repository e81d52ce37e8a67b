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
	"sync"

	"golang.org/x/sync/errgroup"

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

// objectCreator creates DeviceClasses, Nodes (with their capacity written
// through the status subresource) and ResourceSlices, several at a time. It
// remembers what it created, so a retry after a check timeout resumes where
// the last attempt stopped: a cluster of thousands of nodes takes longer to
// populate than one attempt lasts. Objects that already exist are left alone.
type objectCreator struct {
	client kubernetes.Interface
	objs   *clusterspec.Objects
	mu     sync.Mutex
	done   map[string]bool
}

func newObjectCreator(client kubernetes.Interface, objs *clusterspec.Objects) *objectCreator {
	return &objectCreator{client: client, objs: objs, done: map[string]bool{}}
}

// createWorkers bounds the concurrent creations: enough to populate 5,000
// nodes in a minute, within the admin client's rate limit.
const createWorkers = 16

func (o *objectCreator) create(ctx context.Context) error {
	for _, dc := range o.objs.DeviceClasses {
		if _, err := o.client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	for _, n := range o.objs.Nodes {
		o.each(g, gctx, "node/"+n.Name, func(ctx context.Context) error { return createNode(ctx, o.client, n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(createWorkers)
	for _, s := range o.objs.ResourceSlices {
		o.each(g, gctx, "slice/"+s.Name, func(ctx context.Context) error {
			if _, err := o.client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); ignoreExists(err) != nil {
				return fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// each runs create for key unless an earlier attempt did.
func (o *objectCreator) each(g *errgroup.Group, ctx context.Context, key string, create func(context.Context) error) {
	o.mu.Lock()
	done := o.done[key]
	o.mu.Unlock()
	if done {
		return
	}
	g.Go(func() error {
		if err := create(ctx); err != nil {
			return err
		}
		o.mu.Lock()
		o.done[key] = true
		o.mu.Unlock()
		return nil
	})
}

func createNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if len(created.Status.Capacity) > 0 {
		return nil
	}
	created.Status.Capacity = n.Status.Capacity
	created.Status.Allocatable = n.Status.Allocatable
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", n.Name, err)
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

// componentReady: a Lockstep component's /readyz on port says it is ready
// (the webhook: caches synced, serving, its CA injected into the
// configurations; the scheduler: caches synced).
func componentReady(ctx context.Context, port int) error {
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
		return fmt.Errorf("/readyz on port %d: %s", port, resp.Status)
	}
	return nil
}
