package bench

import (
	"context"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

// dataplaneRouterAuth is how TestBenchDataplane's router checks its
// callers: BENCH_DP_ROUTER_AUTH, tokenreview (the router's default, what a
// tenant's program goes through) or none.
func dataplaneRouterAuth(t *testing.T) string {
	t.Helper()
	switch v := os.Getenv("BENCH_DP_ROUTER_AUTH"); v {
	case "", "tokenreview":
		return "tokenreview"
	case "none":
		return v
	default:
		t.Fatalf("BENCH_DP_ROUTER_AUTH=%q: want tokenreview or none", v)
		return ""
	}
}

// benchCaller is the caller the SDK's requests through the router carry
// with --auth=tokenreview: a token of a ServiceAccount of ns bound to a
// Role that may exec into every Sandbox of ns (create sandboxes/exec, as
// the shipped agent-sandbox-exec grants), as a tenant's program is. With
// auth none it is no option at all.
func benchCaller(t *testing.T, cfg *rest.Config, ns, auth string) []sdk.Option {
	t.Helper()
	if auth != "tokenreview" {
		return nil
	}
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(cfg)
	const name = "bench-caller"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sandboxv1beta1.GroupName}, Resources: []string{"sandboxes/exec"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's RBAC sees the binding from its own watch: wait
	// until it does, so the first phase does not start on a refusal.
	user := "system:serviceaccount:" + ns + ":" + name
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create",
				Group: sandboxv1beta1.GroupName, Resource: "sandboxes", Subresource: "exec"}}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s may not exec into the Sandboxes of %s after 30 s (%v)", user, ns, err)
		}
	}
	return []sdk.Option{sdk.WithBearerToken(tr.Status.Token)}
}
