package e2e

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestSandboxExecAggregatesToEditNotView: on a cluster with the
// clusterrole-aggregation controller (kube-controller-manager) and the
// RBAC of dist/install.yaml (installed by TestMain), the ClusterRole
// agent-sandbox-exec aggregates into edit and admin: a namespace editor or
// admin may create sandboxes/exec there (what the router's tokenreview
// mode asks), a viewer may not.
func TestSandboxExecAggregatesToEditNotView(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	ns := namespace(t, c)
	for _, role := range []string{"admin", "edit", "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "user-" + role}}}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(local.Config)
	may := func(user string) (bool, error) {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Name: "any-sandbox", Verb: "create", Group: "agents.x-k8s.io", Resource: "sandboxes", Subresource: "exec"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, user := range []string{"user-admin", "user-edit"} {
		for {
			ok, err := may(user)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s may not create sandboxes/exec in %s: agent-sandbox-exec did not aggregate", user, ns)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if ok, err := may("user-view"); err != nil || ok {
		t.Errorf("a viewer may create sandboxes/exec: %t, %v", ok, err)
	}
}
