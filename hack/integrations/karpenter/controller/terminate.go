package main

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// kwokProviderPrefix is kwok's provider ID scheme: kwok://<node name>.
const kwokProviderPrefix = "kwok://"

// registrationWindow is how long a terminated instance's Node is watched
// for: kwok registers a launched instance's Node from a goroutine, after
// its node class's registration delay.
const registrationWindow = time.Minute

// Delete terminates the instance. kwok's own Delete removes nothing: the
// Node of a NodeClaim is deleted by Karpenter's termination when it exists,
// but a NodeClaim deleted right after its launch (a set released whole)
// has no Node yet, and kwok's goroutine then registers one for an instance
// a real provider would have terminated — a node that nothing ever
// removes. The Node is deleted now, and again if it registers later.
func (c *capacityLimited) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	err := c.CloudProvider.Delete(ctx, nc)
	name, ok := strings.CutPrefix(nc.Status.ProviderID, kwokProviderPrefix)
	if !ok || name == "" {
		return err
	}
	logger := log.FromContext(ctx).WithValues("node", name)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), registrationWindow)
		defer cancel()
		_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			derr := c.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			switch {
			case derr == nil:
				logger.Info("deleted the node of a terminated instance")
				return true, nil
			case apierrors.IsNotFound(derr):
				return false, nil // not registered (yet)
			default:
				return false, nil
			}
		})
	}()
	return err
}
