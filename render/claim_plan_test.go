package render

import (
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/golden"
)

// poolUID is the UID of every claim case's warm pool (what readObject
// gives a pool.yaml), which its members name as their controller.
const poolUID = "5f0d7c2e-0000-4000-8000-pool"

// goldenFieldManager is the field manager claim cases adopt members as.
const goldenFieldManager = "agent-sandbox-controller"

// assertClaimPlan checks a claim case's plan.yaml: the claim's reconcile as
// PlanClaim decides it from what the case observes. A claim that is bound,
// expired or refused as status.yaml says (validated) reports status.yaml's
// status.
func assertClaimPlan(t *testing.T, c golden.Case, claim *extv1beta1.SandboxClaim, tmpl *extv1beta1.SandboxTemplate,
	obs claimObserved, validated *ClaimRejection, now metav1.Time, status *extac.SandboxClaimApplyConfiguration) {
	t.Helper()
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{
		Namespace: claim.Namespace, Name: claim.Spec.WarmPoolRef.Name, UID: poolUID}}
	pool.Spec.TemplateRef.Name = tmpl.Name
	in := ClaimPlanInputs{
		Claim: claim, SandboxName: obs.SandboxName, Pending: obs.Pending,
		ExpiredHere: obs.Expired, NotOwned: obs.ExpiredMessage,
		Pool: pool, Template: tmpl, Policies: obs.Policies, Now: now.Time, FieldManager: goldenFieldManager,
	}
	if obs.NoPool {
		in.Pool = nil
	}
	if obs.NoTemplate {
		in.Template = nil
	}
	if obs.Sandbox != nil {
		// The reconciler sees only Sandboxes the claim controls.
		sb := obs.Sandbox.DeepCopy()
		if metav1.GetControllerOfNoCopy(sb) == nil {
			sb.OwnerReferences = append(sb.OwnerReferences, *metav1.NewControllerRef(claim, extv1beta1.GroupVersion.WithKind("SandboxClaim")))
		}
		if sb.UID == "" {
			sb.UID = "5f0d7c2e-0000-4000-8000-sandbox"
		}
		if sb.ResourceVersion == "" {
			sb.ResourceVersion = "1"
		}
		in.Sandbox = sb
	}
	if obs.RefusedReason != "" {
		in.Refused, in.RefusedReason = obs.Member, obs.RefusedReason
	} else if obs.Member != nil {
		in.Candidates = append(in.Candidates, obs.Member)
	}
	in.Candidates = append(in.Candidates, obs.Candidates...)
	for _, m := range in.Candidates {
		if slices.Contains(obs.Removing, m.Name) {
			in.Removals = append(in.Removals, m)
		}
	}

	before := mustYAML(t, in)
	plan, rej, err := PlanClaim(in)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	golden.AssertYAML(t, c.Path("plan.yaml"), map[string]any{"plan": plan, "rejection": rej})
	again, rej2, _ := PlanClaim(in)
	if a, b, after := mustYAML(t, plan), mustYAML(t, again), mustYAML(t, in); a != b || before != after || !reflect.DeepEqual(rej, rej2) {
		t.Errorf("PlanClaim is not pure (outputs equal %v; inputs unchanged %v)", a == b, before == after)
	}

	for _, s := range plan.Steps {
		switch s.Action {
		case ActionDelete:
			p := s.Preconditions
			if p == nil || p.UID == "" || (s.Kind == "Sandbox" && p.ResourceVersion == "") {
				t.Errorf("delete of %s %s is not guarded (UID, and a Sandbox's resourceVersion): %+v", s.Kind, s.Name, p)
			}
		case ActionAdopt:
			if !slices.ContainsFunc(in.Candidates, func(m *sandboxv1beta1.Sandbox) bool { return m.Name == s.Name }) {
				t.Errorf("the plan adopts %s, which the queue did not offer", s.Name)
			}
			if slices.Contains(obs.Removing, s.Name) {
				t.Errorf("the plan adopts %s, which the pool is deleting", s.Name)
			}
		case ActionStatus:
			if expired, _ := ClaimExpired(in); expired != obs.Expired {
				continue // status.yaml does not know the claim expired
			}
			if obs.SandboxName != "" || obs.Expired || (rej != nil && reflect.DeepEqual(rej, validated)) {
				if got, want := mustYAML(t, s.Object.(*extac.SandboxClaimApplyConfiguration).Status), mustYAML(t, status.Status); got != want {
					t.Errorf("the plan reports a status other than status.yaml's:\n%s\nwant\n%s", got, want)
				}
			}
		}
	}
}
