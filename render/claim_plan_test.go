package render

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/api/convert"
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
	in.Others, in.Holding = obs.Others, obs.Holding
	for _, m := range in.Candidates {
		if slices.Contains(obs.Removing, m.Name) {
			in.Removals = append(in.Removals, m)
		}
	}

	if claim.ResourceVersion == "" {
		claim.ResourceVersion = "100" // as the API server would: a binding's commit is guarded by it
	}
	before := mustYAML(t, in)
	plan, rej, err := PlanClaim(in)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	again, rej2, _ := PlanClaim(in)
	if a, b, after := mustYAML(t, plan), mustYAML(t, again), mustYAML(t, in); a != b || before != after || !reflect.DeepEqual(rej, rej2) {
		t.Errorf("PlanClaim is not pure (outputs equal %v; inputs unchanged %v)", a == b, before == after)
	}
	out := map[string]any{"plan": plan, "rejection": rej}
	if rej == nil {
		if binding := assertClaimBinding(t, in, plan, obs); binding != nil {
			out["binding"] = binding
		}
	}
	golden.AssertYAML(t, c.Path("plan.yaml"), out)

	expired, _ := ClaimExpired(in)
	for _, s := range plan.Steps {
		switch s.Action {
		case ActionDelete:
			assertGuardedDelete(t, s, claim)
			if s.Kind == "Sandbox" && !expired && s.Name == in.SandboxName {
				t.Errorf("the plan deletes %s, the Sandbox bound to the claim", s.Name)
			}
		case ActionAdopt:
			if !slices.ContainsFunc(in.Candidates, func(m *sandboxv1beta1.Sandbox) bool { return m.Name == s.Name }) {
				t.Errorf("the plan adopts %s, which the queue did not offer", s.Name)
			}
			if slices.Contains(obs.Removing, s.Name) {
				t.Errorf("the plan adopts %s, which the pool is deleting", s.Name)
			}
		case ActionStatus:
			if expired != obs.Expired {
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

// assertGuardedDelete checks that a delete is guarded by UID (and a
// Sandbox's by resourceVersion too) and that a Sandbox it deletes is one
// the claim controls.
func assertGuardedDelete(t *testing.T, s Step, claim *extv1beta1.SandboxClaim) {
	t.Helper()
	p := s.Preconditions
	if p == nil || p.UID == "" || (s.Kind == "Sandbox" && p.ResourceVersion == "") {
		t.Errorf("delete of %s %s is not guarded (UID, and a Sandbox's resourceVersion): %+v", s.Kind, s.Name, p)
	}
	if sb, ok := s.Live.(*sandboxv1beta1.Sandbox); s.Kind == "Sandbox" && (!ok || !extv1beta1.IsClaimedBy(sb, claim) || sb.UID != p.UID) {
		t.Errorf("the plan deletes Sandbox %s, which the claim does not control", s.Name)
	}
}

// assertClaimBinding checks the commit in a plan that adopts or creates a
// Sandbox: after that step, the annotations, then the status naming the
// Sandbox, both guarded by the claim's resourceVersion. When another
// controller bound the claim first (boundElsewhere), the commit conflicts
// and the plan is made again (Committing) from the claim read again: it
// must hold only the guarded delete of the Sandbox bound here. The Sandbox
// as the write returned it is the member as adopted (its resourceVersion
// one more) or the created one. It returns what plan.yaml shows of the
// plan made again, nil when there is none.
func assertClaimBinding(t *testing.T, in ClaimPlanInputs, plan Plan, obs claimObserved) map[string]any {
	t.Helper()
	var sb *sandboxv1beta1.Sandbox
	var actions []Action
	for _, s := range plan.Steps {
		switch s.Action {
		case ActionAdopt:
			sb = Adopted(in.Claim, in.Template, s.Live.(*sandboxv1beta1.Sandbox))
			if rv, err := strconv.Atoi(sb.ResourceVersion); err == nil {
				sb.ResourceVersion = strconv.Itoa(rv + 1)
			}
		case ActionCreate:
			sb = &sandboxv1beta1.Sandbox{}
			if err := convert.JSON(s.Object, sb); err != nil {
				t.Fatal(err)
			}
			sb.UID, sb.ResourceVersion = "5f0d7c2e-0000-4000-8000-sandbox", "1"
		case ActionAnnotate, ActionStatus:
			if sb == nil {
				continue
			}
			actions = append(actions, s.Action)
			ac, ok := s.Object.(*extac.SandboxClaimApplyConfiguration)
			if !ok || ac.ResourceVersion == nil || *ac.ResourceVersion != in.Claim.ResourceVersion {
				t.Errorf("binding step %s is not guarded by the claim's resourceVersion", s.Action)
				continue
			}
			if s.Action == ActionStatus && (ac.Status == nil || ac.Status.Sandbox == nil || ptr.Deref(ac.Status.Sandbox.Name, "") != sb.Name) {
				t.Errorf("the binding's status does not name %s", sb.Name)
			}
		}
	}
	if sb == nil {
		if obs.BoundElsewhere != "" {
			t.Errorf("boundElsewhere is set, but the plan binds nothing")
		}
		return nil
	}
	if !slices.Equal(actions, []Action{ActionAnnotate, ActionStatus}) && !slices.Equal(actions, []Action{ActionStatus}) {
		t.Errorf("binding steps %v, want the annotations, then the status", actions)
	}
	if obs.BoundElsewhere == "" {
		return nil
	}
	claim := in.Claim.DeepCopy()
	claim.Status.Sandbox.Name = obs.BoundElsewhere
	in.Claim, in.SandboxName, in.Sandbox, in.Pending, in.Committing = claim, sb.Name, sb, false, true
	in.Candidates, in.Refused = nil, nil

	before := mustYAML(t, in)
	binding, _, err := PlanClaim(in)
	if err != nil {
		t.Fatal(err)
	}
	boundTo := ClaimBoundTo(in)
	if again, _, _ := PlanClaim(in); mustYAML(t, again) != mustYAML(t, binding) || mustYAML(t, in) != before {
		t.Errorf("the commit's plan is not pure")
	}
	if boundTo != obs.BoundElsewhere {
		t.Errorf("bound to %q, want %q", boundTo, obs.BoundElsewhere)
	}
	for _, s := range binding.Steps {
		if s.Action != ActionDelete || s.Name != sb.Name {
			t.Errorf("a lost binding's plan holds %s %s %s; want only the delete of %s", s.Action, s.Kind, s.Name, sb.Name)
		}
		assertGuardedDelete(t, s, claim)
	}
	return map[string]any{"plan": binding, "boundTo": boundTo}
}
