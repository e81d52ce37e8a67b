package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// bindWorkers bounds the writes in flight for one unit.
const bindWorkers = 16

// errClaimWrite marks a failure of the claim phase.
var errClaimWrite = errors.New("writing claim allocations")

// errVolumeBind marks a failure of the volume phase.
var errVolumeBind = errors.New("binding volumes")

// binder turns assignments into API writes: claims first, then bindings.
type binder struct {
	client kubernetes.Interface
	cache  *snapshot.Cache
	clock  clock.WithTicker
	// claimIndex is the claim informer's indexer (extendedOwnerIndex).
	claimIndex cache.Indexer
	crashAt    int64 // Options.CrashAfterBinds; negative: off
	binds      atomic.Int64
}

func newBinder(client kubernetes.Interface, c *snapshot.Cache, clk clock.WithTicker, crashAt int64) *binder {
	return &binder{client: client, cache: c, clock: clk, crashAt: crashAt}
}

// claimWrite is everything this cycle writes to one claim.
type claimWrite struct {
	claim    *resourcev1.ResourceClaim // as placement left it (allocation set)
	newAlloc bool
	pods     []*corev1.Pod
	// written is the claim as the API server stored it.
	written *resourcev1.ResourceClaim
	// extended is set for a claim created for its one pod's extended
	// resources: the mappings to record in the pod's status. Such a claim
	// is deleted, not released, when its pod is not bound.
	extended []corev1.ContainerExtendedResourceRequest
}

// bind writes the assignments and returns the pods it bound, in three
// phases: every member's volumes (kube-scheduler's VolumeBinding PreBind:
// PersistentVolume bindings or the selected node for provisioning, waited
// for until the PersistentVolume controller has bound them), then every
// claim, then every binding. On a volume- or claim-phase failure it binds
// nothing (volumes already bound stay bound, and pin their pods to the
// nodes chosen, as in kube-scheduler). On a bind-phase failure it releases
// the claims of the pods it could not bind and returns the error; pods
// already bound stay bound (a binding cannot be undone) and count toward
// minCount next time.
//
// The placement must have been assumed (assume) first; bind ends the
// assumption's pin, so what it wrote stays assumed only until the informers
// show it.
//
// Pods in protect are bound with karpenter.sh/do-not-disrupt (unless they
// name it themselves): the binding adds the annotation, no other write.
func (b *binder) bind(ctx context.Context, asgs []placement.Assignment, protect map[types.UID]bool) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	writes := groupClaimWrites(asgs)
	defer b.settle(asgs, writes)
	forgetAll := func() {
		for _, asg := range asgs {
			b.cache.ForgetPod(asg.Pod.UID)
			if asg.Volumes != nil {
				asg.Volumes.Unreserve(ctx)
			}
		}
	}
	if err := bindVolumes(ctx, asgs); err != nil {
		forgetAll()
		return nil, fmt.Errorf("%w: %w", errVolumeBind, err)
	}
	exts, err := b.createExtendedClaims(ctx, asgs)
	if err == nil {
		var written []*claimWrite
		written, err = b.writeClaims(ctx, append(writes, exts...))
		if err == nil {
			err = b.patchExtendedStatus(ctx, exts)
		}
		if err == nil {
			err = b.waitBindingConditions(ctx, append(writes, exts...))
		}
		if err != nil {
			b.releaseClaims(ctx, written, nil)
		}
	}
	if err != nil {
		b.deleteExtended(ctx, exts, nil)
		// assume held every claim as this placement would have written
		// it; what was not written must not linger (a retry decides
		// from the informer's view again).
		for _, w := range writes {
			b.cache.ForgetClaim(types.NamespacedName{Namespace: w.claim.Namespace, Name: w.claim.Name})
		}
		forgetAll()
		return nil, fmt.Errorf("%w: %w", errClaimWrite, err)
	}
	b.maybeCrash(logger, 0)
	failed := b.bindPods(ctx, asgs, protect)
	bound := make([]*corev1.Pod, 0, len(asgs))
	for _, asg := range asgs {
		if _, ok := failed[asg.Pod.UID]; !ok {
			bound = append(bound, asg.Pod)
		}
	}
	if len(failed) == 0 {
		return bound, nil
	}
	unbound := map[types.UID]bool{}
	var errs []error
	for _, asg := range asgs {
		if _, ok := failed[asg.Pod.UID]; ok && asg.Volumes != nil {
			asg.Volumes.Unreserve(ctx)
		}
	}
	for uid, err := range failed {
		unbound[uid] = true
		b.cache.ForgetPod(uid)
		errs = append(errs, err)
	}
	b.releaseClaims(ctx, writes, unbound)
	b.deleteExtended(ctx, exts, unbound)
	return bound, fmt.Errorf("binding %d of %d pods failed: %w", len(failed), len(asgs), errors.Join(errs...))
}

// assume records a placement in the cache before any of it is written, so
// the cycles that run while it is being bound see its nodes, devices and
// claims taken: pods on their nodes, claims allocated and reserved for
// them, the claims for extended resources under their in-memory names. The
// entries are pinned — they do not expire while the binding runs, however
// long it waits for volumes — until bind settles them.
func (b *binder) assume(asgs []placement.Assignment) {
	for _, asg := range asgs {
		b.cache.AssumePod(asg.Pod, asg.Node, true)
		if asg.Extended != nil {
			c := asg.Extended.Claim.DeepCopy()
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: asg.Pod.Name, UID: asg.Pod.UID}}
			b.cache.AssumeClaim(c, true)
		}
	}
	for _, w := range groupClaimWrites(asgs) {
		c := w.claim.DeepCopy()
		for _, p := range w.pods {
			if !reservedFor(c, p.UID) {
				c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			}
		}
		b.cache.AssumeClaim(c, true)
	}
}

// settle ends the pins assume set: entries of what was written now wait
// for the informers (or expire); the in-memory extended-resource claims are
// dropped (their created claims, if any, are assumed under their names).
func (b *binder) settle(asgs []placement.Assignment, writes []*claimWrite) {
	for _, asg := range asgs {
		b.cache.UnpinPod(asg.Pod.UID)
		if asg.Extended != nil {
			b.cache.ForgetClaim(types.NamespacedName{Namespace: asg.Extended.Claim.Namespace, Name: asg.Extended.Claim.Name})
		}
	}
	for _, w := range writes {
		b.cache.UnpinClaim(types.NamespacedName{Namespace: w.claim.Namespace, Name: w.claim.Name})
	}
}

// bindVolumes runs the volume phase for every assignment with volumes to
// bind, in parallel (each waits for the PersistentVolume controller).
func bindVolumes(ctx context.Context, asgs []placement.Assignment) error {
	var with []placement.Assignment
	for _, asg := range asgs {
		if asg.Volumes != nil {
			with = append(with, asg)
		}
	}
	return parallel(ctx, len(with), func(ctx context.Context, i int) error {
		return with[i].Volumes.PreBind(ctx)
	})
}

func groupClaimWrites(asgs []placement.Assignment) []*claimWrite {
	byKey := map[types.NamespacedName]*claimWrite{}
	var out []*claimWrite
	for _, asg := range asgs {
		for i, c := range asg.Claims {
			key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
			w := byKey[key]
			if w == nil {
				w = &claimWrite{claim: c}
				byKey[key] = w
				out = append(out, w)
			}
			if asg.NewlyAllocated[i] {
				w.newAlloc = true
				w.claim = c
			}
			w.pods = append(w.pods, asg.Pod)
		}
	}
	return out
}

// writeClaims writes allocation and reservations; it returns the writes
// that succeeded, for rollback.
func (b *binder) writeClaims(ctx context.Context, writes []*claimWrite) ([]*claimWrite, error) {
	var mu sync.Mutex
	var done []*claimWrite
	err := parallel(ctx, len(writes), func(ctx context.Context, i int) error {
		w := writes[i]
		if err := b.writeClaim(ctx, w); err != nil {
			return fmt.Errorf("claim %s/%s: %w", w.claim.Namespace, w.claim.Name, err)
		}
		mu.Lock()
		done = append(done, w)
		mu.Unlock()
		return nil
	})
	return done, err
}

func (b *binder) writeClaim(ctx context.Context, w *claimWrite) error {
	claims := b.client.ResourceV1().ResourceClaims(w.claim.Namespace)
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := w.claim.DeepCopy()
		if !first || !w.newAlloc {
			latest, err := claims.Get(ctx, w.claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if w.newAlloc && latest.Status.Allocation != nil {
				return fmt.Errorf("claim was allocated by someone else meanwhile")
			}
			if w.newAlloc {
				latest.Status.Allocation = w.claim.Status.Allocation.DeepCopy()
			}
			cur = latest
		}
		first = false
		if w.newAlloc && cur.Status.Allocation.AllocationTimestamp == nil {
			// When the allocation was made: binding conditions time out
			// from here (as kube-scheduler records it).
			cur.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: b.clock.Now()}
		}
		for _, p := range w.pods {
			if !reservedFor(cur, p.UID) {
				cur.Status.ReservedFor = append(cur.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			}
		}
		updated, err := claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		w.written = updated
		b.cache.AssumeClaim(updated, false)
		return nil
	})
}

func reservedFor(c *resourcev1.ResourceClaim, uid types.UID) bool {
	for _, r := range c.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// releaseClaims removes the reservations of the given pods (all pods of the
// write when only is nil) and, for claims this cycle allocated and nobody
// else uses, the allocation.
func (b *binder) releaseClaims(ctx context.Context, writes []*claimWrite, only map[types.UID]bool) {
	logger := klog.FromContext(ctx)
	for _, w := range writes {
		if w.extended != nil {
			continue // deleteExtended
		}
		drop := map[types.UID]bool{}
		for _, p := range w.pods {
			if only == nil || only[p.UID] {
				drop[p.UID] = true
			}
		}
		if len(drop) == 0 {
			continue
		}
		key := types.NamespacedName{Namespace: w.claim.Namespace, Name: w.claim.Name}
		b.cache.ForgetClaim(key)
		if err := releaseClaim(ctx, b.client, key, drop, w.newAlloc); err != nil {
			logger.Error(err, "Releasing claim after a failed binding", "claim", key)
		}
	}
}

// releaseClaim drops the reservations of the pods in drop and, if dealloc
// and no reservation remains, the allocation.
func releaseClaim(ctx context.Context, client kubernetes.Interface, key types.NamespacedName, drop map[types.UID]bool, dealloc bool) error {
	claims := client.ResourceV1().ResourceClaims(key.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, key.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		kept := c.Status.ReservedFor[:0]
		for _, r := range c.Status.ReservedFor {
			if !drop[r.UID] {
				kept = append(kept, r)
			}
		}
		c.Status.ReservedFor = kept
		if dealloc && len(kept) == 0 {
			// The devices' status (binding conditions) goes with the
			// allocation, as when kube-scheduler deallocates.
			c.Status.Allocation, c.Status.Devices = nil, nil
		}
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

// bindPods binds in parallel and returns the pods that failed.
func (b *binder) bindPods(ctx context.Context, asgs []placement.Assignment, protect map[types.UID]bool) map[types.UID]error {
	logger := klog.FromContext(ctx)
	var mu sync.Mutex
	failed := map[types.UID]error{}
	_ = parallel(ctx, len(asgs), func(ctx context.Context, i int) error {
		asg := asgs[i]
		err := retry.OnError(retry.DefaultBackoff, func(err error) bool { return !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) }, func() error {
			return b.client.CoreV1().Pods(asg.Pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: asg.Pod.Namespace, Name: asg.Pod.Name, UID: asg.Pod.UID, Annotations: bindingAnnotations(asg.Pod, protect)},
				Target:     corev1.ObjectReference{Kind: "Node", Name: asg.Node},
			}, metav1.CreateOptions{})
		})
		if err != nil {
			mu.Lock()
			failed[asg.Pod.UID] = fmt.Errorf("pod %s: %w", klog.KObj(asg.Pod), err)
			mu.Unlock()
			return nil
		}
		logger.V(2).Info("Bound pod", "pod", klog.KObj(asg.Pod), "node", asg.Node)
		b.maybeCrash(logger, b.binds.Add(1))
		return nil
	})
	return failed
}

// bindingAnnotations are the annotations a pod's binding adds: Karpenter's
// do-not-disrupt for a protected pod, unless the pod names it itself (its
// own value, e.g. a duration, is the user's and is kept).
func bindingAnnotations(pod *corev1.Pod, protect map[types.UID]bool) map[string]string {
	if !protect[pod.UID] {
		return nil
	}
	if _, own := pod.Annotations[provision.DoNotDisruptAnnotation]; own {
		return nil
	}
	return map[string]string{provision.DoNotDisruptAnnotation: "true"}
}

func (b *binder) maybeCrash(logger klog.Logger, n int64) {
	if b.crashAt >= 0 && n == b.crashAt {
		logger.Info("Test hook: exiting mid-binding (--test-crash-after-binds)", "binds", n)
		klog.Flush()
		os.Exit(3)
	}
}

// parallel runs f for 0..n-1 on up to bindWorkers goroutines and returns the
// first error; the others still finish.
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, bindWorkers)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err })
			}
		}(i)
	}
	wg.Wait()
	return first
}
