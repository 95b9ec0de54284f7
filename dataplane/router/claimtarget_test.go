package router

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestRouteClaimUID: a target found through a claim reaches only a
// Sandbox that claim (by UID) controls: not a standalone one, not another
// claim's, not a pool member.
func TestRouteClaimUID(t *testing.T) {
	for _, c := range []struct {
		name, ownerKind string
		claimUID        string
		want            int
	}{
		{"claimed by it", "SandboxClaim", "owner-uid", 0},
		{"another claim's", "SandboxClaim", "other-uid", http.StatusNotFound},
		{"standalone", "", "owner-uid", http.StatusNotFound},
		{"a pool member", "SandboxWarmPool", "owner-uid", http.StatusNotFound},
		{"a claim of another kind", "SandboxTemplate", "owner-uid", http.StatusNotFound},
	} {
		sb := testSandbox("box", c.ownerKind)
		_, e := Route(sb, testPod(sb, "box", "10.0.0.1"), Target{ID: "box", Namespace: "team", Port: 1, ClaimUID: types.UID(c.claimUID)})
		switch {
		case c.want == 0 && e != nil:
			t.Errorf("%s: refused: %v", c.name, e)
		case c.want != 0 && (e == nil || e.Status != c.want):
			t.Errorf("%s: got %v, want %d", c.name, e, c.want)
		}
	}
}

// TestRouteResumeOnConnectTarget: a target that asks for resume on
// connect makes a Suspended Sandbox without the annotation resumable; one
// that does not is refused as before.
func TestRouteResumeOnConnectTarget(t *testing.T) {
	sb := testSandbox("box", "SandboxClaim")
	sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	_, e := Route(sb, nil, Target{ID: "box", Namespace: "team", Port: 1})
	if e == nil || e.Resume != nil || e.Status != http.StatusConflict {
		t.Errorf("without opt-in: %+v", e)
	}
	_, e = Route(sb, nil, Target{ID: "box", Namespace: "team", Port: 1, ResumeOnConnect: true})
	if e == nil || e.Resume == nil || !e.Resume.Suspended || e.Resume.Key.UID != sb.UID {
		t.Errorf("with the target's opt-in: %+v", e)
	}
}
