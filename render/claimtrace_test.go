package render

import (
	"testing"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
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
