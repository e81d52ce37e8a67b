package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A tenant given Kubernetes' own user-facing roles in a namespace — a
// RoleBinding to admin, edit or view, nothing Lockstep-specific — may use
// Lockstep's kinds there as those roles allow for Jobs (kube-controller-
// manager aggregates config/rbac/tenants.yaml into them): admin and edit
// create, change and delete PodGroups, CompositePodGroups and Workloads,
// view reads them; none writes their status, and none reaches another
// namespace. The editor then creates a PodGroup with its own identity.
func TestBuiltInRolesCoverLockstepKinds(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	other := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	for _, role := range []string{"admin", "edit", "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: role + "-user"}}}
		if _, err := h.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type check struct {
		user, ns, verb, resource, sub string
		allowed                       bool
	}
	var checks []check
	for _, res := range []string{"podgroups", "compositepodgroups", "workloads"} {
		for _, user := range []string{"admin-user", "edit-user"} {
			for _, verb := range []string{"create", "update", "patch", "delete", "get", "list", "watch"} {
				checks = append(checks, check{user, ns, verb, res, "", true})
			}
			checks = append(checks, check{user, ns, "update", res, "status", false}, check{user, other, "create", res, "", false})
		}
		for _, verb := range []string{"get", "list", "watch"} {
			checks = append(checks, check{"view-user", ns, verb, res, "", true}, check{"view-user", ns, verb, res, "status", true})
		}
		for _, verb := range []string{"create", "update", "delete"} {
			checks = append(checks, check{"view-user", ns, verb, res, "", false})
		}
		checks = append(checks, check{"view-user", other, "get", res, "", false})
	}
	// The aggregation controller fills the roles asynchronously, and the
	// authorizer sees them through its own cache.
	harness.Eventually(t, ctx, "the built-in roles grant Lockstep's kinds as reviewed", func(ctx context.Context) (bool, string, error) {
		for _, c := range checks {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: c.user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: lockv1.GroupVersion.Group, Resource: c.resource, Subresource: c.sub}}}
			got, err := h.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return false, "", err
			}
			if got.Status.Allowed != c.allowed {
				return false, fmt.Sprintf("%s %s %s/%s in %s: allowed %v, want %v", c.user, c.verb, c.resource, c.sub, c.ns, got.Status.Allowed, c.allowed), nil
			}
		}
		return true, "", nil
	})
	cfg := rest.CopyConfig(h.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "edit-user"}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	editor := &harness.Harness{Dynamic: dyn, Config: cfg}
	editor.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "by-the-editor", 2))
}
