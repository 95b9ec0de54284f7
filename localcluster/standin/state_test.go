package standin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestKeyOf(t *testing.T) {
	owned := func(apiVersion, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: "sb", UID: "u1", Controller: new(true),
		}}}}
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		wantKey Key
		wantUID types.UID
	}{
		{"a Sandbox's Pod", owned("agents.x-k8s.io/v1beta1", "Sandbox"), Key{"ns", "sb"}, "u1"},
		{"a v1alpha1 owner reference", owned("agents.x-k8s.io/v1alpha1", "Sandbox"), Key{"ns", "sb"}, "u1"},
		{"another group's Sandbox", owned("example.com/v1", "Sandbox"), Key{"ns", "pod"}, ""},
		{"another kind", owned("agents.x-k8s.io/v1beta1", "ReplicaSet"), Key{"ns", "pod"}, ""},
		{"no owner", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod"}}, Key{"ns", "pod"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, uid := KeyOf(tc.pod)
			if k != tc.wantKey || uid != tc.wantUID {
				t.Errorf("KeyOf = %v, %q; want %v, %q", k, uid, tc.wantKey, tc.wantUID)
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if st, err := readState(dir); err != nil || st != (State{}) {
		t.Fatalf("no state file: %+v, %v; want the zero State", st, err)
	}
	want := State{SandboxUID: "u1", Pod: "p", PodUID: "u2", PID: 42, Port: 4242}
	if err := writeState(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, err := readState(dir); err != nil || got != want {
		t.Fatalf("readState = %+v, %v; want %+v", got, err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile+".tmp")); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readState(dir); err == nil {
		t.Error("a broken state file was read without an error")
	}
}

func TestListAndRemoveKeys(t *testing.T) {
	dir := t.TempDir()
	if keys, err := listKeys(filepath.Join(dir, "missing")); err != nil || len(keys) != 0 {
		t.Fatalf("listKeys of a missing directory = %v, %v", keys, err)
	}
	want := []Key{{"a", "one"}, {"a", "two"}, {"b", "three"}}
	for _, k := range want {
		if err := os.MkdirAll(WorkDir(dir, k), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "stray-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := listKeys(dir)
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("listKeys = %v, %v; want %v", keys, err, want)
	}
	if err := removeSandboxDir(dir, Key{"b", "three"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("the empty namespace directory is left: %v", err)
	}
	if err := removeSandboxDir(dir, Key{"a", "one"}); err != nil {
		t.Fatal(err)
	}
	if keys, _ := listKeys(dir); !slices.Equal(keys, []Key{{"a", "two"}}) {
		t.Errorf("after removing two: %v", keys)
	}
}
