package render

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func bindingClaim() *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "claim", ResourceVersion: "10"}}
}

// controlledSandbox is a Sandbox named name that claim c controls.
func controlledSandbox(name string) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "5",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
			Name: "c", UID: "claim", Controller: ptr.To(true)}}}}
}

func deletes(plan Plan) []string {
	var out []string
	for _, s := range plan.Steps {
		if s.Action == ActionDelete {
			out = append(out, s.Name)
		}
	}
	return out
}

// A lost binding deletes the Sandbox bound here only when the claim
// controls it, it is not the one the claim names, it is not going and it
// can be guarded.
func TestPlanClaimCommitLostRaceGuards(t *testing.T) {
	going := controlledSandbox("mine")
	going.DeletionTimestamp = &metav1.Time{}
	foreign := controlledSandbox("mine")
	foreign.OwnerReferences[0].UID = "other-claim"
	unguarded := controlledSandbox("mine")
	unguarded.ResourceVersion = ""
	for name, tc := range map[string]struct {
		sb     *sandboxv1beta1.Sandbox
		bound  string // the Sandbox the claim read again names
		delete bool
	}{
		"ours, lost":              {sb: controlledSandbox("mine"), bound: "theirs", delete: true},
		"the one the claim names": {sb: controlledSandbox("mine"), bound: "mine"},
		"not controlled":          {sb: foreign, bound: "theirs"},
		"going already":           {sb: going, bound: "theirs"},
		"no resourceVersion":      {sb: unguarded, bound: "theirs"},
		"not known":               {bound: "theirs"},
	} {
		t.Run(name, func(t *testing.T) {
			c := bindingClaim()
			c.Status.Sandbox.Name = tc.bound
			in := ClaimPlanInputs{Claim: c, SandboxName: "mine", Sandbox: tc.sb, Committing: true, Now: time.Unix(100, 0)}
			plan, rej, err := PlanClaim(in)
			if err != nil || rej != nil {
				t.Fatalf("plan: %v %v", rej, err)
			}
			if boundTo := ClaimBoundTo(in); boundTo != tc.bound {
				t.Errorf("bound to %q, want %q", boundTo, tc.bound)
			}
			got := deletes(plan)
			if tc.delete != (len(got) == 1) || len(got) > 1 {
				t.Fatalf("deletes %v, want a delete of mine: %v", got, tc.delete)
			}
			if tc.bound != "mine" && len(plan.Steps) != len(got) {
				t.Errorf("a lost binding's plan writes to the claim: %+v", plan.Steps)
			}
			if tc.delete {
				p := plan.Steps[0].Preconditions
				if p == nil || p.UID != tc.sb.UID || p.ResourceVersion != tc.sb.ResourceVersion {
					t.Errorf("delete not guarded by the Sandbox's UID and resourceVersion: %+v", p)
				}
			}
		})
	}
}

// The binding's writes are guarded by the version our last write left,
// else the claim's, and the annotations come before the status.
func TestPlanClaimCommitGuard(t *testing.T) {
	sb := controlledSandbox("mine")
	for version, want := range map[string]string{"": "10", "12": "12"} {
		in := ClaimPlanInputs{Claim: bindingClaim(), SandboxName: "mine", Sandbox: sb, Version: version, Committing: true, Now: time.Unix(100, 0)}
		plan, _, err := PlanClaim(in)
		if boundTo := ClaimBoundTo(in); err != nil || boundTo != "mine" || len(plan.Steps) != 2 || plan.Steps[0].Action != ActionAnnotate || plan.Steps[1].Action != ActionStatus {
			t.Fatalf("version %q: bound to %q, steps %+v", version, boundTo, plan.Steps)
		}
		for _, s := range plan.Steps {
			if rv := ptr.Deref(s.Object.(*extac.SandboxClaimApplyConfiguration).ResourceVersion, ""); rv != want {
				t.Errorf("version %q: %s guarded by %q, want %q", version, s.Action, rv, want)
			}
		}
	}
}

// A second Sandbox goes only once the claim's status names the bound one,
// and never the bound one, the one held, or one the claim does not control.
func TestSecondSandboxDeletes(t *testing.T) {
	foreign := controlledSandbox("foreign")
	foreign.OwnerReferences[0].UID = "other-claim"
	others := []*sandboxv1beta1.Sandbox{controlledSandbox("bound"), controlledSandbox("second"),
		controlledSandbox("held"), foreign}
	for status, want := range map[string][]string{"bound": {"second"}, "": nil, "second": nil} {
		c := bindingClaim()
		c.Status.Sandbox.Name = status
		in := ClaimPlanInputs{Claim: c, SandboxName: "bound", Sandbox: controlledSandbox("bound"),
			Others: others, Holding: "held", Now: time.Unix(100, 0)}
		plan, _, err := PlanClaim(in)
		if err != nil {
			t.Fatal(err)
		}
		got := deletes(plan)
		if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Errorf("status names %q: deletes %v, want %v", status, got, want)
		}
	}
}

// A bound claim's annotations record it first Ready when the status the
// plan writes reports it Ready for the first time; one Ready before keeps
// upstream's sentinel.
func TestPlanClaimRecordsFirstReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sb := controlledSandbox("bound")
	sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "R"}}
	for name, tc := range map[string]struct {
		claimReady bool
		want       string
	}{
		"first Ready now":   {want: now.Format(time.RFC3339Nano)},
		"Ready before seen": {claimReady: true, want: extv1beta1.ClaimFirstReadyUnknown},
	} {
		c := bindingClaim()
		c.Status.Sandbox.Name = "bound"
		if tc.claimReady {
			c.Status.Conditions = []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "R"}}
		}
		plan, _, err := PlanClaim(ClaimPlanInputs{Claim: c, SandboxName: "bound", Sandbox: sb, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		last := plan.Steps[len(plan.Steps)-1]
		if last.Action != ActionAnnotate {
			t.Fatalf("%s: the plan ends with %s, want the annotations after the status", name, last.Action)
		}
		if got := last.Object.(*extac.SandboxClaimApplyConfiguration).Annotations[extv1beta1.AnnotationClaimFirstReadyAt]; got != tc.want {
			t.Errorf("%s: claim-first-ready-at %q, want %q", name, got, tc.want)
		}
	}
}

// A rejection the API server's answer made is reported, and nothing else
// is done: no Sandbox is adopted or created, whatever the queue offers.
func TestPlanClaimReportsARejectedAnswer(t *testing.T) {
	c := bindingClaim()
	c.Spec.WarmPoolRef.Name = "pool"
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "pool-uid"}}
	rej := &ClaimRejection{Reason: extv1beta1.ReasonReconcilerError, Message: "sandbox create error: invalid"}
	in := ClaimPlanInputs{Claim: c, Pool: pool, Rejected: rej, Now: time.Unix(100, 0)}
	plan, got, err := PlanClaim(in)
	if err != nil || got != rej || plan.Problem != rej.Message {
		t.Fatalf("rejection %v, problem %q, err %v", got, plan.Problem, err)
	}
	last := plan.Steps[len(plan.Steps)-1]
	for _, s := range plan.Steps {
		if s.Action != ActionAnnotate && s.Action != ActionStatus {
			t.Errorf("the report of a rejected answer holds a %s step", s.Action)
		}
	}
	st := last.Object.(*extac.SandboxClaimApplyConfiguration)
	if last.Action != ActionStatus || st.ResourceVersion != nil || ptr.Deref(st.Status.Conditions[0].Message, "") == "" {
		t.Errorf("the plan ends with %s %+v, want the unguarded status reporting the rejection", last.Action, st)
	}
}

// The commit of a Sandbox the create found there already (the claim's own)
// reports it as observed: Ready, it records the claim first Ready now.
func TestPlanClaimCommitsAnExistingSandbox(t *testing.T) {
	sb := controlledSandbox("c")
	sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue, Reason: "R"}}
	now := time.Unix(100, 0).UTC()
	plan, _, err := PlanClaim(ClaimPlanInputs{Claim: bindingClaim(), SandboxName: "c", Sandbox: sb, Committing: true, Now: now})
	if err != nil || len(plan.Steps) != 2 {
		t.Fatalf("steps %+v, err %v", plan.Steps, err)
	}
	a := plan.Steps[0].Object.(*extac.SandboxClaimApplyConfiguration)
	if got := a.Annotations[extv1beta1.AnnotationClaimFirstReadyAt]; got != now.Format(time.RFC3339Nano) {
		t.Errorf("claim-first-ready-at %q, want now", got)
	}
	if !reportsReady(plan.Steps[1].Object.(*extac.SandboxClaimApplyConfiguration)) {
		t.Error("the commit does not report the claim Ready")
	}
}
