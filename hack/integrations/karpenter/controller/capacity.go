package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// capacityConfigMap limits launches per instance type and zone (the package
// comment states the contract).
const capacityConfigMap = "karpenter-capacity"

// capacityLimited is a cloud provider (kwok's) whose launches the
// karpenter-capacity ConfigMap limits.
type capacityLimited struct {
	cloudprovider.CloudProvider
	kube      kubernetes.Interface
	namespace string
	// lister reads the ConfigMap for GetInstanceTypes, which Karpenter's
	// scheduler calls often; Create reads it from the API server.
	lister corev1listers.ConfigMapNamespaceLister
	run    func(ctx context.Context)

	// launch serializes Create: its read, decrement and launch are one step.
	launch sync.Mutex
	mu     sync.Mutex
	// failed are the offerings (capacity keys) a launch failed on for lack
	// of capacity, reported unavailable while their key stays at 0.
	failed map[string]bool
}

var _ cloudprovider.CloudProvider = (*capacityLimited)(nil)

func newCapacityLimited(inner cloudprovider.CloudProvider, kube kubernetes.Interface, namespace string) *capacityLimited {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + capacityConfigMap }))
	lister := factory.Core().V1().ConfigMaps().Lister().ConfigMaps(namespace)
	return &capacityLimited{
		CloudProvider: inner, kube: kube, namespace: namespace, lister: lister, failed: map[string]bool{},
		run: func(ctx context.Context) { factory.Start(ctx.Done()); factory.WaitForCacheSync(ctx.Done()) },
	}
}

// start runs the ConfigMap's informer with the manager.
func (c *capacityLimited) start(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		c.run(ctx)
		<-ctx.Done()
		return nil
	}))
}

// capacityKey is an offering's key in the ConfigMap.
func capacityKey(instanceType, zone string) string { return instanceType + "." + zone }

// offering is where a launch goes.
type offering struct {
	instanceType, zone, capacityType string
	price                            float64
	capacity                         corev1.ResourceList
}

func (o offering) key() string { return capacityKey(o.instanceType, o.zone) }

// Create launches nc on the cheapest offering it allows that has capacity
// left, or fails with InsufficientCapacityError when none has.
func (c *capacityLimited) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	c.launch.Lock()
	defer c.launch.Unlock()
	its, err := c.CloudProvider.GetInstanceTypes(ctx, nil)
	if err != nil {
		return nil, err
	}
	var chosen *offering
	reserved := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, left, err := c.capacity(ctx)
		if err != nil {
			return err
		}
		var blocked []string
		if chosen, blocked = choose(its, nc, left); chosen == nil {
			if len(blocked) == 0 {
				return nil // nothing nc allows: kwok says why
			}
			c.markFailed(blocked)
			return cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no capacity left for %s (ConfigMap %s/%s)",
				strings.Join(blocked, ", "), c.namespace, capacityConfigMap))
		}
		n, limited := left[chosen.key()]
		if !limited {
			return nil
		}
		cm.Data[chosen.key()] = strconv.Itoa(n - 1)
		if _, err := c.kube.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return err
		}
		reserved = true
		log.FromContext(ctx).Info("took limited capacity", "offering", chosen.key(), "left", n-1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if chosen == nil {
		return c.CloudProvider.Create(ctx, nc)
	}
	created, err := c.CloudProvider.Create(ctx, pin(nc, *chosen))
	if err != nil && reserved {
		c.giveBack(ctx, chosen.key())
	}
	return created, err
}

// capacity reads the ConfigMap (nil when absent) and its limits.
func (c *capacityLimited) capacity(ctx context.Context) (*corev1.ConfigMap, map[string]int, error) {
	cm, err := c.kube.CoreV1().ConfigMaps(c.namespace).Get(ctx, capacityConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	left, err := parseCapacity(cm)
	return cm, left, err
}

// parseCapacity is the ConfigMap's limits; a value that is not a
// non-negative integer is an error.
func parseCapacity(cm *corev1.ConfigMap) (map[string]int, error) {
	left := make(map[string]int, len(cm.Data))
	for k, v := range cm.Data {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("ConfigMap %s/%s: %s=%q: want the number of launches left, a non-negative integer", cm.Namespace, cm.Name, k, v)
		}
		left[k] = n
	}
	return left, nil
}

// choose is the cheapest offering nc allows with capacity left (ties: the
// first in its order), and the keys of the offerings it allows that have
// none.
func choose(its []*cloudprovider.InstanceType, nc *v1.NodeClaim, left map[string]int) (*offering, []string) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	types := reqs.Get(corev1.LabelInstanceTypeStable)
	var best *offering
	var blocked []string
	for _, it := range its {
		if !types.Has(it.Name) {
			continue
		}
		for _, of := range it.Offerings.Available().Compatible(reqs) {
			o := offering{instanceType: it.Name, price: of.Price, capacity: it.Capacity,
				zone: of.Requirements.Get(corev1.LabelTopologyZone).Any(), capacityType: of.Requirements.Get(v1.CapacityTypeLabelKey).Any()}
			if n, ok := left[o.key()]; ok && n <= 0 {
				if !slices.Contains(blocked, o.key()) {
					blocked = append(blocked, o.key())
				}
				continue
			}
			if best == nil || o.price < best.price {
				best = &o
			}
		}
	}
	return best, blocked
}

// pin is nc with its instance type, zone and capacity type requirements
// narrowed to o, for kwok's Create (which picks among what they allow),
// and the instance type's capacity as its requests: kwok gives the Node (and
// the NodeClaim's status) the NodeClaim's requests as capacity, where a
// real instance reports its whole capacity.
func pin(nc *v1.NodeClaim, o offering) *v1.NodeClaim {
	out := nc.DeepCopy()
	out.Spec.Resources.Requests = o.capacity.DeepCopy()
	pinned := []v1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{o.instanceType}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{o.zone}},
		{Key: v1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{o.capacityType}},
	}
	out.Spec.Requirements = slices.DeleteFunc(out.Spec.Requirements, func(r v1.NodeSelectorRequirementWithMinValues) bool {
		return slices.ContainsFunc(pinned, func(p v1.NodeSelectorRequirementWithMinValues) bool { return p.Key == r.Key })
	})
	for _, p := range pinned {
		if p.Values[0] != "" {
			out.Spec.Requirements = append(out.Spec.Requirements, p)
		}
	}
	return out
}

// giveBack returns a reserved launch whose Create failed (best effort: the
// count only errs on the side of fewer launches).
func (c *capacityLimited) giveBack(ctx context.Context, key string) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, left, err := c.capacity(ctx)
		if err != nil || cm == nil {
			return err
		}
		n, ok := left[key]
		if !ok {
			return nil
		}
		cm.Data[key] = strconv.Itoa(n + 1)
		_, err = c.kube.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "failed giving back limited capacity", "offering", key)
	}
}

func (c *capacityLimited) markFailed(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.failed[k] = true
	}
}

// exhausted are the offerings a launch failed on whose key is still 0; it
// forgets the others.
func (c *capacityLimited) exhausted() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failed) == 0 {
		return nil
	}
	cm, err := c.lister.Get(capacityConfigMap)
	for k := range c.failed {
		if err != nil || strings.TrimSpace(cm.Data[k]) != "0" {
			delete(c.failed, k)
		}
	}
	return maps.Clone(c.failed)
}

// GetInstanceTypes is kwok's instance types with the offerings a launch
// failed on for lack of capacity unavailable while they have none.
func (c *capacityLimited) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	its, err := c.CloudProvider.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	out := c.exhausted()
	if len(out) == 0 {
		return its, nil
	}
	res := slices.Clone(its)
	for i, it := range its {
		var cp *cloudprovider.InstanceType
		for j, of := range it.Offerings {
			if !out[capacityKey(it.Name, of.Requirements.Get(corev1.LabelTopologyZone).Any())] {
				continue
			}
			if cp == nil {
				cp = it.DeepCopy()
				res[i] = cp
			}
			cp.Offerings[j].Available = false
		}
	}
	return res, nil
}
