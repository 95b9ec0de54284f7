package render

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// TestClaimSandboxTraceContext: the cold-started Sandbox carries the
// reconcile's trace context when one is given, never the claim's own
// annotation value (the claim's author wrote that).
func TestClaimSandboxTraceContext(t *testing.T) {
	const reconcile = `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	for _, tc := range []struct {
		name, given, want string
	}{{"traced", reconcile, reconcile}, {"off", "", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			c := guardClaim(func(c *extv1beta1.SandboxClaim) {
				c.Annotations = map[string]string{sandboxv1beta1.AnnotationTraceContext: `{"traceparent":"forged"}`}
			})
			sb, err := ClaimSandbox(ClaimInputs{Claim: c, Template: guardTemplate(""), TraceContext: tc.given})
			if err != nil {
				t.Fatal(err)
			}
			if got := sb.Annotations[sandboxv1beta1.AnnotationTraceContext]; got != tc.want {
				t.Fatalf("trace-context %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAdoptedSandboxTraceContext: a warm member the claim takes carries the
// reconcile's trace context from the adoption's apply, never the claim's
// own annotation value; with tracing off the adoption writes none.
func TestAdoptedSandboxTraceContext(t *testing.T) {
	const reconcile = `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	for _, tc := range []struct {
		name, given, want string
	}{{"traced", reconcile, reconcile}, {"off", "", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			c := guardClaim(func(c *extv1beta1.SandboxClaim) {
				c.Annotations = map[string]string{sandboxv1beta1.AnnotationTraceContext: `{"traceparent":"forged"}`}
				c.ResourceVersion = "100"
			})
			tmpl := guardTemplate("")
			pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.WarmPoolRef.Name, UID: poolUID}}
			pool.Spec.TemplateRef.Name = tmpl.Name
			member := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "member",
				UID: "7d1c0000-0000-4000-8000-00000000cccc", ResourceVersion: "42",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pool, extv1beta1.GroupVersion.WithKind("SandboxWarmPool"))}}}
			member.Spec.PodTemplate.Spec = tmpl.Spec.PodTemplate.Spec
			plan, rej, err := PlanClaim(ClaimPlanInputs{Claim: c, Pool: pool, Template: tmpl, Candidates: []*sandboxv1beta1.Sandbox{member},
				Now: time.Unix(1_800_000_000, 0), FieldManager: goldenFieldManager, TraceContext: tc.given})
			if err != nil || rej != nil {
				t.Fatalf("plan: %v, %+v", err, rej)
			}
			var adopted *sandboxac.SandboxApplyConfiguration
			for _, s := range plan.Steps {
				if s.Action == ActionAdopt {
					adopted, _ = s.Object.(*sandboxac.SandboxApplyConfiguration)
				}
			}
			if adopted == nil {
				t.Fatalf("the plan adopts nothing: %+v", plan.Steps)
			}
			if got := adopted.Annotations[sandboxv1beta1.AnnotationTraceContext]; got != tc.want {
				t.Fatalf("trace-context %q, want %q", got, tc.want)
			}
		})
	}
}
