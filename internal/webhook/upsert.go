package webhook

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// configs is the typed client of a webhook configuration kind.
type configs[T client.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// upsert creates want or replaces the existing object's content with it.
func upsert[T client.Object](ctx context.Context, c configs[T], want T) error {
	cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	want.SetResourceVersion(cur.GetResourceVersion())
	_, err = c.Update(ctx, want, metav1.UpdateOptions{})
	return err
}
