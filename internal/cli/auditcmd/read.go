package auditcmd

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/audit"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Resources the audit lists besides the integrations' kinds.
var (
	podsResource           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	eventsResource         = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	claimsResource         = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}
	claimTemplatesResource = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}
	// statefulSetsResource: a LeaderWorkerSet's pods reach it through them.
	statefulSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

// Reads are every resource the audit lists — the only verb it uses. The
// read-only ClusterRole (ClusterRole) grants exactly these.
func Reads() []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{podsResource, eventsResource, claimsResource, claimTemplatesResource, statefulSetsResource, podgroup.Resource, podgroup.UpstreamResource}
	for _, integ := range integrations.All() {
		out = append(out, integ.GVK().GroupVersion().WithResource(integ.Resource()))
	}
	return out
}

// pageSize bounds each list call: a large cluster's pods come in pages.
const pageSize = 500

// reader lists what an audit reads into an audit.Input.
type reader struct {
	c  *clientopts.Clients
	ns string
	in *audit.Input
}

// read lists the objects of namespace ns ("" for all) an audit needs.
// Pods are required; a kind the API server does not serve is skipped and
// one the user may not list is noted.
func read(ctx context.Context, c *clientopts.Clients, ns string, now time.Time) (*audit.Input, error) {
	r := &reader{c: c, ns: ns, in: &audit.Input{Now: now}}
	if err := r.pods(ctx); err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context) error{r.claims, r.events, r.jobs, r.podGroups} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return r.in, nil
}

func (r *reader) pods(ctx context.Context) error {
	return pages(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := r.c.Kube.CoreV1().Pods(r.ns).List(ctx, opts)
		if apierrors.IsForbidden(err) {
			return "", fmt.Errorf("listing pods: %w: the audit needs list on pods (and the other resources of the read-only ClusterRole lockstep-audit, docs/audit-clusterrole.yaml)", err)
		}
		if err != nil {
			return "", fmt.Errorf("listing pods: %w", err)
		}
		for i := range list.Items {
			r.in.Pods = append(r.in.Pods, &list.Items[i])
		}
		return list.Continue, nil
	})
}

func (r *reader) claims(ctx context.Context) error {
	if ok, err := r.served(claimsResource); err != nil || !ok {
		if err == nil {
			r.in.Notes = append(r.in.Notes, "resource.k8s.io/v1 (DRA) is not served: only extended resources are counted")
		}
		return err
	}
	err := pages(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := r.c.Kube.ResourceV1().ResourceClaims(r.ns).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			r.in.Claims = append(r.in.Claims, &list.Items[i])
		}
		return list.Continue, nil
	})
	if err := r.forbidden(err, claimsResource, "DRA devices are not counted"); err != nil {
		return err
	}
	list, err := r.c.Kube.ResourceV1().ResourceClaimTemplates(r.ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for i := range list.Items {
			r.in.ClaimTemplates = append(r.in.ClaimTemplates, &list.Items[i])
		}
	}
	return r.forbidden(err, claimTemplatesResource, "the devices of claims deleted with their pods are not counted")
}

func (r *reader) events(ctx context.Context) error {
	sel := fields.OneTermEqualSelector("reason", audit.PreemptedReason).String()
	err := pages(ctx, func(opts metav1.ListOptions) (string, error) {
		opts.FieldSelector = sel
		list, err := r.c.Kube.CoreV1().Events(r.ns).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			if list.Items[i].InvolvedObject.Kind == "Pod" {
				r.in.Events = append(r.in.Events, &list.Items[i])
			}
		}
		return list.Continue, nil
	})
	return r.forbidden(err, eventsResource, "preemptions of pods that are gone are not seen")
}

// jobs lists every integrated kind the API server serves (and the
// StatefulSets a LeaderWorkerSet's pods reach it through).
func (r *reader) jobs(ctx context.Context) error {
	for _, integ := range integrations.All() {
		gvr := integ.GVK().GroupVersion().WithResource(integ.Resource())
		ok, err := r.served(gvr)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		err = r.dynamic(ctx, gvr, func(u *unstructured.Unstructured) error {
			obj := integ.NewObject()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				return fmt.Errorf("reading %s %s/%s: %w", integ.GVK().Kind, u.GetNamespace(), u.GetName(), err)
			}
			r.in.Jobs = append(r.in.Jobs, obj)
			return nil
		})
		if err := r.forbidden(err, gvr, "their pods are audited by their controller, without the kind's shape"); err != nil {
			return err
		}
		if integ.GVK().Kind == "LeaderWorkerSet" {
			if err := r.statefulSets(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *reader) statefulSets(ctx context.Context) error {
	err := pages(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := r.c.Kube.AppsV1().StatefulSets(r.ns).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			r.in.Owners = append(r.in.Owners, &list.Items[i])
		}
		return list.Continue, nil
	})
	return r.forbidden(err, statefulSetsResource, "the pods of LeaderWorkerSets are audited by their StatefulSets")
}

// podGroups lists the API server's groups first, then Lockstep's (which
// win a shared name).
func (r *reader) podGroups(ctx context.Context) error {
	for _, gvr := range []schema.GroupVersionResource{podgroup.UpstreamResource, podgroup.Resource} {
		ok, err := r.served(gvr)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		err = r.dynamic(ctx, gvr, func(u *unstructured.Unstructured) error {
			pg, err := podgroup.FromUnstructured(u)
			if err != nil {
				return fmt.Errorf("reading PodGroup %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			r.in.PodGroups = append(r.in.PodGroups, pg)
			return nil
		})
		if err := r.forbidden(err, gvr, "pods naming them are taken to need every pod they had"); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) dynamic(ctx context.Context, gvr schema.GroupVersionResource, each func(*unstructured.Unstructured) error) error {
	return pages(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := r.c.Dynamic.Resource(gvr).Namespace(r.ns).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			if err := each(&list.Items[i]); err != nil {
				return "", err
			}
		}
		return list.GetContinue(), nil
	})
}

func (r *reader) served(gvr schema.GroupVersionResource) (bool, error) {
	return apidiscovery.Serves(r.c.Kube.Discovery(), gvr.GroupVersion().String(), gvr.Resource)
}

// forbidden turns a list the user may not make into a note saying what the
// audit misses; other errors are returned.
func (r *reader) forbidden(err error, gvr schema.GroupVersionResource, misses string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		r.in.Notes = append(r.in.Notes, fmt.Sprintf("could not list %s (forbidden): %s; the ClusterRole lockstep-audit (docs/audit-clusterrole.yaml) grants it", resourceName(gvr), misses))
		return nil
	}
	return fmt.Errorf("listing %s: %w", resourceName(gvr), err)
}

func resourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}

// pages calls list with a page size until the server says there is no
// more.
func pages(ctx context.Context, list func(metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		next, err := list(opts)
		if err != nil {
			return err
		}
		if next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		opts.Continue = next
	}
}
