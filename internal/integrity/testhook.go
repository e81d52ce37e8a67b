package integrity

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// holdPodInformer installs the fault-test hook Reconciler.HoldPodInformer
// (the hidden flag --test-hold-pod-informer of `lockstep controllers`):
// when it names a file, the pod informer of the controllers' cache, after a
// list or watch fails (the API server went away), does not try again while
// that file exists — a pod cache far behind the PodGroup cache, as
// client-go's back-off can leave one after an API server restart. It
// creates <file>.held when it starts holding, so a test knows the fault
// took.
func holdPodInformer(ctx context.Context, c crcache.Cache, path string) error {
	if path == "" {
		return nil
	}
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	h, ok := inf.(interface {
		SetWatchErrorHandlerWithContext(toolscache.WatchErrorHandlerWithContext) error
	})
	if !ok {
		return fmt.Errorf("--test-hold-pod-informer: the pod informer (%T) takes no watch error handler", inf)
	}
	return h.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
		if _, statErr := os.Stat(path); statErr != nil {
			return
		}
		logger := klog.FromContext(ctx)
		logger.Info("Test hook: holding the pod informer back", "file", path)
		if f, err := os.Create(path + ".held"); err == nil {
			_ = f.Close()
		}
		for {
			if _, err := os.Stat(path); err != nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		logger.Info("Test hook: pod informer released", "file", path)
	})
}
