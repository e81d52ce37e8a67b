package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
)

// extendedOwnerIndex indexes claims created for a pod's extended resources
// by the UID of that pod.
const extendedOwnerIndex = "lockstep-extended-claim-owner"

func extendedOwnerIndexFunc(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	if uid := dra.ExtendedClaimOwner(c); uid != "" {
		return []string{string(uid)}, nil
	}
	return nil, nil
}

// createExtendedClaims creates, for each assignment with extended resources
// from DRA, its claim (generated name, the pod as controller), first
// deleting claims left for the pod by an earlier attempt that did not bind.
// It returns a claim write per created claim, with the allocation to write
// and the pod to reserve it for; on error the claims created so far are
// among them, for rollback.
func (b *binder) createExtendedClaims(ctx context.Context, asgs []placement.Assignment) ([]*claimWrite, error) {
	var with []placement.Assignment
	for _, asg := range asgs {
		if asg.Extended != nil {
			with = append(with, asg)
		}
	}
	var mu sync.Mutex
	var out []*claimWrite
	err := parallel(ctx, len(with), func(ctx context.Context, i int) error {
		asg := with[i]
		if err := b.deleteStaleExtended(ctx, asg.Pod); err != nil {
			return err
		}
		want := asg.Extended.Claim.DeepCopy()
		want.Name, want.Status = "", resourcev1.ResourceClaimStatus{}
		created, err := b.client.ResourceV1().ResourceClaims(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating the claim for the extended resources of pod %s: %w", klog.KObj(asg.Pod), err)
		}
		created.Status.Allocation = asg.Extended.Claim.Status.Allocation.DeepCopy()
		// Held under its real name from now on (settle drops the
		// in-memory one).
		held := created.DeepCopy()
		held.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: asg.Pod.Name, UID: asg.Pod.UID}}
		b.cache.AssumeClaim(held, true)
		mu.Lock()
		out = append(out, &claimWrite{claim: created, newAlloc: true, pods: []*corev1.Pod{asg.Pod}, extended: asg.Extended.Mappings})
		mu.Unlock()
		return nil
	})
	return out, err
}

// deleteStaleExtended deletes the extended-resource claims of an unbound
// pod that a failed or interrupted attempt left behind.
func (b *binder) deleteStaleExtended(ctx context.Context, p *corev1.Pod) error {
	if b.claimIndex == nil {
		return nil
	}
	objs, err := b.claimIndex.ByIndex(extendedOwnerIndex, string(p.UID))
	if err != nil {
		return err
	}
	for _, o := range objs {
		c := o.(*resourcev1.ResourceClaim)
		klog.FromContext(ctx).V(2).Info("Deleting the extended-resource claim of an earlier attempt", "pod", klog.KObj(p), "claim", klog.KObj(c))
		if err := b.deleteClaim(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Name}); err != nil {
			return err
		}
	}
	return nil
}

// patchExtendedStatus records each created claim and its container
// mappings in pod.status.extendedResourceClaimStatus, which the kubelet
// reads to hand the devices to the containers.
func (b *binder) patchExtendedStatus(ctx context.Context, writes []*claimWrite) error {
	return parallel(ctx, len(writes), func(ctx context.Context, i int) error {
		w := writes[i]
		p := w.pods[0]
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": p.UID}, // never a pod of the same name that took its place
			"status": map[string]any{"extendedResourceClaimStatus": corev1.PodExtendedResourceClaimStatus{
				ResourceClaimName: w.claim.Name,
				RequestMappings:   w.extended,
			}},
		})
		if err != nil {
			return err
		}
		if _, err := b.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("pod %s: recording its extended-resource claim: %w", klog.KObj(p), err)
		}
		return nil
	})
}

// deleteExtended deletes the created claims of the given pods (all when
// only is nil): their pods were not bound.
func (b *binder) deleteExtended(ctx context.Context, writes []*claimWrite, only map[types.UID]bool) {
	for _, w := range writes {
		if only != nil && !only[w.pods[0].UID] {
			continue
		}
		key := types.NamespacedName{Namespace: w.claim.Namespace, Name: w.claim.Name}
		if err := b.deleteClaim(ctx, key); err != nil {
			klog.FromContext(ctx).Error(err, "Deleting the extended-resource claim of a pod that was not bound", "claim", key)
		}
	}
}

func (b *binder) deleteClaim(ctx context.Context, key types.NamespacedName) error {
	b.cache.ForgetClaim(key)
	err := b.client.ResourceV1().ResourceClaims(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
