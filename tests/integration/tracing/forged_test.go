package tracing

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// TestForgedTraceContext plays a claim author who writes garbage into the
// trace-context annotation: malformed JSON, a traceparent that does not
// parse, an oversized value. The claim is served as any other; its
// reconcile starts a trace of its own, and the Sandbox carries that one,
// never the forged value.
var errNoSpan = errors.New("no span recorded yet")

func TestForgedTraceContext(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	env.CreatePool(t, ns, "cold", 0)
	forged := map[string]string{
		"not-json":   `{"traceparent": `,
		"bad-parent": `{"traceparent":"00-zzzz-0000000000000000-01"}`,
		"oversized":  `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","x":"` + strings.Repeat("a", 2000) + `"}`,
	}
	for name, v := range forged {
		claim := &extv1beta1.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{sandboxv1beta1.AnnotationTraceContext: v}},
			Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "cold"}},
		}
		if err := env.Client.Create(ctxFor(t), claim); err != nil {
			t.Fatal(err)
		}
	}
	for name := range forged {
		sb := &sandboxv1beta1.Sandbox{}
		envtest.Eventually(t, time.Minute, "claim "+name+" gets its Sandbox", func() error {
			return env.Client.Get(ctxFor(t), crclient.ObjectKey{Namespace: ns, Name: name}, sb)
		})
		traceID, _ := traceparent(t, sb.Annotations[sandboxv1beta1.AnnotationTraceContext])
		if traceID == "4bf92f3577b34da6a3ce929d0e0e4736" || traceID == "00000000000000000000000000000000" {
			t.Errorf("claim %s: Sandbox continues the forged trace %s", name, traceID)
		}
		// The Sandbox is made inside the reconcile's span, which ends
		// (and is recorded) only when the reconcile returns.
		envtest.Eventually(t, 10*time.Second, "claim "+name+": a recorded span of the Sandbox's trace "+traceID, func() error {
			if len(spansOf(traceID)) == 0 {
				return errNoSpan
			}
			return nil
		})
	}
}
