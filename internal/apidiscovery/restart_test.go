package apidiscovery

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// The runnable ends with an error once the kind is served, and without one
// when its context ends while the kind is still not served.
func TestRestartWhenServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	r := RestartWhenServed{Discovery: d, GroupVersion: "scheduling.lockstep.dev/v1beta1", Resource: "compositepodgroups", Interval: 10 * time.Millisecond}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("not served, context ended: got %v, want nil", err)
	}

	d.Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.lockstep.dev/v1beta1", APIResources: []metav1.APIResource{{Name: "compositepodgroups"}}}}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Start(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("served: got %v (context %v), want a restart error before the context ends", err, ctx.Err())
	}
}
