package standin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestKwokObjects(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "runner", UID: "pod-uid"}}
	objs := kwokObjects(pod, "/w/ns/sb", ports{legacy: 40123, rest: 40124, grpc: 40125, envd: 40126}, []corev1.EnvVar{{Name: "K", Value: "V"}})
	want := map[string]map[string]any{
		// Every port the runtime serves, each to its own local listener.
		"PortForward": {"forwards": []any{
			map[string]any{"ports": []any{int64(8888)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(40123)}},
			map[string]any{"ports": []any{int64(8080)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(40124)}},
			map[string]any{"ports": []any{int64(9090)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(40125)}},
			map[string]any{"ports": []any{int64(49983)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(40126)}},
		}},
		"Exec": {"execs": []any{map[string]any{
			"local": map[string]any{"workDir": "/w/ns/sb/work", "envs": []any{map[string]any{"name": "K", "value": "V"}}},
		}}},
		"Logs": {"logs": []any{map[string]any{"logsFile": "/w/ns/sb/container.log", "follow": true}}},
	}
	if len(objs) != len(want) {
		t.Fatalf("%d objects, want %d", len(objs), len(want))
	}
	for gvr, u := range objs {
		if u.GetAPIVersion() != "kwok.x-k8s.io/v1alpha1" || u.GetNamespace() != "ns" || u.GetName() != "runner" {
			t.Errorf("%s: %s %s/%s, want kwok.x-k8s.io/v1alpha1 ns/runner", gvr.Resource, u.GetAPIVersion(), u.GetNamespace(), u.GetName())
		}
		refs := u.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].Name != "runner" || refs[0].UID != "pod-uid" {
			t.Errorf("%s: owner references %+v, want the Pod", gvr.Resource, refs)
		}
		if diff := cmp.Diff(want[u.GetKind()], u.Object["spec"]); diff != "" {
			t.Errorf("%s spec (-want +got):\n%s", u.GetKind(), diff)
		}
	}
}

func TestLiteralEnv(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Env: []corev1.EnvVar{
			{Name: "A", Value: "1"},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "C"},
		}},
		{Env: []corev1.EnvVar{{Name: "SIDECAR", Value: "x"}}},
	}}}
	want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "C"}}
	if diff := cmp.Diff(want, literalEnv(pod)); diff != "" {
		t.Errorf("literalEnv (-want +got):\n%s", diff)
	}
	if got := literalEnv(&corev1.Pod{}); got != nil {
		t.Errorf("literalEnv of a Pod without containers = %v", got)
	}
}

// A runtime adopted from before sandboxd (no REST or gRPC port recorded)
// gets only the legacy port forwarded.
func TestKwokObjectsLegacyOnlyRuntime(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old", UID: "u"}}
	for _, u := range kwokObjects(pod, "/w", State{Port: 40123}.ports(), nil) {
		if u.GetKind() != "PortForward" {
			continue
		}
		want := []any{map[string]any{"ports": []any{int64(8888)}, "target": map[string]any{"address": "127.0.0.1", "port": int64(40123)}}}
		if diff := cmp.Diff(want, u.Object["spec"].(map[string]any)["forwards"]); diff != "" {
			t.Errorf("forwards (-want +got):\n%s", diff)
		}
	}
}
