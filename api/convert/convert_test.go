package convert

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestJSONCopiesThroughTheWireFormat(t *testing.T) {
	in := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	var out map[string]any
	if err := JSON(in, &out); err != nil {
		t.Fatal(err)
	}
	back := &corev1.Pod{}
	if err := JSON(out, back); err != nil {
		t.Fatal(err)
	}
	if back.Name != "p" || back.Labels["a"] != "b" || back.Spec.Containers[0].Image != "i" {
		t.Errorf("round trip lost fields: %+v", back)
	}
	if err := JSON(map[string]any{"metadata": "not an object"}, &corev1.Pod{}); err == nil || !strings.Contains(err.Error(), "decoding") {
		t.Errorf("a value of the wrong shape: error %v, want a decoding error", err)
	}
	if err := JSON(func() {}, &corev1.Pod{}); err == nil {
		t.Error("a value JSON cannot encode: no error")
	}
}

const alphaSandbox = `{"apiVersion":"agents.x-k8s.io/v1alpha1","kind":"Sandbox",
"metadata":{"name":"box","namespace":"ns"},
"spec":{"replicas":0,"podTemplate":{"spec":{"containers":[{"name":"c","image":"i"}]}}}%s}`

func TestBetweenConvertsToTheHubAndBack(t *testing.T) {
	from, to := sandboxv1alpha1.GroupVersion.String(), Hub("Sandbox").String()
	out, err := Between("Sandbox", from, to, []byte(strings.Replace(alphaSandbox, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	sb, ok := out.(*sandboxv1beta1.Sandbox)
	if !ok || sb.Name != "box" || sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		t.Fatalf("converted to %T %+v, want a suspended v1beta1 Sandbox named box", out, out)
	}
	raw, err := json.Marshal(sb)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Between("Sandbox", to, from, raw)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := back.(*sandboxv1alpha1.Sandbox); !ok || a.Spec.Replicas == nil || *a.Spec.Replicas != 0 {
		t.Errorf("back to v1alpha1: %T %+v, want replicas 0", back, back)
	}
}

func TestBetweenRefusesWhatItDoesNotKnow(t *testing.T) {
	withTypo := []byte(strings.Replace(alphaSandbox, "%s", `,"spek":{}`, 1))
	from, to := sandboxv1alpha1.GroupVersion.String(), sandboxv1beta1.GroupVersion.String()
	if _, err := Between("Sandbox", from, to, withTypo); err != nil {
		t.Errorf("an unknown field is pruned as the API server does: %v", err)
	}
	if _, err := BetweenStrict("Sandbox", from, to, withTypo); err == nil || !strings.Contains(err.Error(), "spek") {
		t.Errorf("strict: an unknown field gave %v, want an error naming it", err)
	}
	if Known("Sandbox", "agents.x-k8s.io/v2", to) {
		t.Error("a version that does not exist is known")
	}
	if _, err := Between("Sandbox", "agents.x-k8s.io/v2", to, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no conversion") {
		t.Errorf("an unknown version: %v, want no conversion", err)
	}
	if _, err := Between("SandboxClaim", "extensions.agents.x-k8s.io/v1alpha1", Hub("SandboxClaim").String(), []byte(`[`)); err == nil {
		t.Error("JSON that does not parse: no error")
	}
}

func TestEveryKindConvertsBothWays(t *testing.T) {
	if NewHub("Pod") != nil {
		t.Error("NewHub made a Pod")
	}
	for _, kind := range []string{"Sandbox", "SandboxTemplate", "SandboxClaim", "SandboxWarmPool"} {
		hub := Hub(kind)
		if kind != "Sandbox" && hub != extv1beta1.GroupVersion {
			t.Errorf("%s: hub %s, want %s", kind, hub, extv1beta1.GroupVersion)
		}
		if NewHub(kind) == nil {
			t.Errorf("NewHub(%s) is nil", kind)
		}
		alpha := hub.Group + "/v1alpha1"
		if !Known(kind, alpha, hub.String()) || !Known(kind, hub.String(), alpha) {
			t.Errorf("%s does not convert both ways between %s and %s", kind, alpha, hub)
		}
	}
}

func TestUnstructuredKeepsKindAndIntegers(t *testing.T) {
	sb := &sandboxv1beta1.Sandbox{TypeMeta: metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: "box", Generation: 3}}
	u, err := Unstructured(sb)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Sandbox" || u.GetName() != "box" {
		t.Errorf("got %s %s", u.GetKind(), u.GetName())
	}
	if g, ok := u.Object["metadata"].(map[string]any)["generation"].(int64); !ok || g != 3 {
		t.Errorf("generation is %T %v, want int64 3 as the API server decodes it", u.Object["metadata"].(map[string]any)["generation"], u.Object["metadata"].(map[string]any)["generation"])
	}
	if same, _ := Unstructured(u); same != u {
		t.Error("an unstructured object was copied")
	}
	if _, err := Unstructured(&corev1.PodSpec{}); err == nil {
		t.Error("something without a kind: no error")
	}
}
