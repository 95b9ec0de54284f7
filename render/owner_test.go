package render

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestClaimMayTakeOnlyThePoolsOwnMembers: a Sandbox whose controller
// reference copies the pool's name and UID under another API group, or
// names another kind, is not the pool's member and no claim may take it.
func TestClaimMayTakeOnlyThePoolsOwnMembers(t *testing.T) {
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "pool-uid"}}
	member := func(apiVersion, kind, name string) *sandboxv1beta1.Sandbox {
		return &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", UID: "m-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: pool.UID, Controller: ptr.To(true)}}}}
	}
	cases := []struct {
		name string
		sb   *sandboxv1beta1.Sandbox
		want bool
	}{
		{"the pool's member", member(extv1beta1.GroupVersion.String(), "SandboxWarmPool", "pool"), true},
		{"another group", member("evil.example.com/v1", "SandboxWarmPool", "pool"), false},
		{"another kind", member(extv1beta1.GroupVersion.String(), "SandboxClaim", "pool"), false},
		{"another name", member(extv1beta1.GroupVersion.String(), "SandboxWarmPool", "other"), false},
	}
	accept := ClaimMayTake(pool, nil)
	for _, tc := range cases {
		if got := accept(tc.sb); got != tc.want {
			t.Errorf("%s: ClaimMayTake = %v, want %v", tc.name, got, tc.want)
		}
	}
}
