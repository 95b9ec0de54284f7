package v1alpha1

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func int32p(v int32) *int32 { return &v }

func alpha(replicas *int32) *Sandbox {
	retain := sandboxv1beta1.ShutdownPolicyRetain
	yes := true
	sb := &Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "ns", Labels: map[string]string{"a": "b"}}}
	sb.APIVersion, sb.Kind = GroupVersion.String(), "Sandbox"
	sb.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}
	sb.Spec.Service = &yes
	sb.Spec.ShutdownPolicy = &retain
	sb.Spec.Replicas = replicas
	return sb
}

func TestSandboxConversion(t *testing.T) {
	cases := []struct {
		replicas *int32
		mode     sandboxv1beta1.SandboxOperatingMode
	}{
		{int32p(1), sandboxv1beta1.SandboxOperatingModeRunning},
		{int32p(0), sandboxv1beta1.SandboxOperatingModeSuspended},
	}
	for _, tc := range cases {
		in := alpha(tc.replicas)
		hub := in.ToV1beta1()
		if hub.Spec.OperatingMode != tc.mode {
			t.Errorf("replicas %d -> operatingMode %s, want %s", *tc.replicas, hub.Spec.OperatingMode, tc.mode)
		}
		back := SandboxFromV1beta1(hub)
		if !equality.Semantic.DeepEqual(in, back) {
			a, _ := json.Marshal(in)
			b, _ := json.Marshal(back)
			t.Errorf("round trip changed the object:\n%s\n%s", a, b)
		}
	}
	// Hub -> v1alpha1 -> hub, including status.
	hub := alpha(int32p(0)).ToV1beta1()
	hub.Status.LabelSelector = "x=y"
	hub.Status.PodIPs = []string{"10.0.0.1"}
	back := SandboxFromV1beta1(hub)
	if back.Status.Replicas != 1 {
		t.Errorf("status.replicas %d with a Pod selector, want 1", back.Status.Replicas)
	}
	if again := back.ToV1beta1(); !equality.Semantic.DeepEqual(hub, again) {
		t.Error("hub round trip changed the object")
	}
}

// FuzzSandboxRoundTrip: any v1alpha1 Sandbox (replicas 0 or 1, as the
// schema allows) survives v1alpha1 -> v1beta1 -> v1alpha1.
func FuzzSandboxRoundTrip(f *testing.F) {
	f.Add(`{"metadata":{"name":"a"},"spec":{"replicas":1,"podTemplate":{"spec":{"containers":[{"name":"c"}]}}}}`)
	f.Add(`{"metadata":{"name":"a","annotations":{"x":"y"}},"spec":{"replicas":0,"service":false,"shutdownTime":"2026-01-01T00:00:00Z","volumeClaimTemplates":[{"metadata":{"name":"d"},"spec":{}}],"podTemplate":{"spec":{}}},"status":{"replicas":1,"selector":"a=b","podIPs":["1.2.3.4"]}}`)
	f.Fuzz(func(t *testing.T, data string) {
		in := &Sandbox{}
		if err := json.Unmarshal([]byte(data), in); err != nil {
			return
		}
		if in.Spec.Replicas == nil || *in.Spec.Replicas < 0 || *in.Spec.Replicas > 1 {
			return // refused by the schema; defaulted to 1 when unset
		}
		// status.replicas is derived from the Pod selector, not stored.
		if in.Status.LabelSelector != "" {
			in.Status.Replicas = 1
		} else {
			in.Status.Replicas = 0
		}
		in.APIVersion, in.Kind = GroupVersion.String(), "Sandbox"
		back := SandboxFromV1beta1(in.ToV1beta1())
		a, _ := json.Marshal(in)
		b, _ := json.Marshal(back)
		if string(a) != string(b) {
			t.Fatalf("round trip changed the object:\n%s\n%s", a, b)
		}
	})
}

// FuzzHubRoundTrip: any v1beta1 Sandbox (operatingMode as the schema
// allows, defaulted to Running) survives v1beta1 -> v1alpha1 -> v1beta1.
func FuzzHubRoundTrip(f *testing.F) {
	f.Add(`{"metadata":{"name":"a"},"spec":{"operatingMode":"Suspended","podTemplate":{"spec":{}}},"status":{"selector":"x=y"}}`)
	f.Add(`{"metadata":{"name":"a","labels":{"k":"v"}},"spec":{"operatingMode":"Running","service":true,"podTemplate":{"spec":{"containers":[{"name":"c"}]}}}}`)
	f.Fuzz(func(t *testing.T, data string) {
		in := &sandboxv1beta1.Sandbox{}
		if err := json.Unmarshal([]byte(data), in); err != nil {
			return
		}
		switch in.Spec.OperatingMode {
		case sandboxv1beta1.SandboxOperatingModeRunning, sandboxv1beta1.SandboxOperatingModeSuspended:
		default:
			return // refused by the schema (or defaulted to Running)
		}
		in.APIVersion, in.Kind = sandboxv1beta1.GroupVersion.String(), "Sandbox"
		back := SandboxFromV1beta1(in).ToV1beta1()
		a, _ := json.Marshal(in)
		b, _ := json.Marshal(back)
		if string(a) != string(b) {
			t.Fatalf("round trip changed the object:\n%s\n%s", a, b)
		}
	})
}
