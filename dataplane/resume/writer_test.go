package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

type applied struct {
	method, path, contentType, manager, force string
	body                                      map[string]any
}

// TestWriter: each write is one forced apply, under its field manager, of
// its one field and the UID.
func TestWriter(t *testing.T) {
	got := make(chan applied, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		a := applied{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
			manager: r.URL.Query().Get("fieldManager"), force: r.URL.Query().Get("force")}
		if err := json.Unmarshal(raw, &a.body); err != nil {
			t.Errorf("body %s: %v", raw, err)
		}
		got <- a
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"agents.x-k8s.io/v1beta1","kind":"Sandbox","metadata":{"name":"box","namespace":"team"}}`)
	}))
	defer srv.Close()
	rc, err := NewREST(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &Writer{REST: rc}
	k := Key{Namespace: "team", Name: "box", UID: "uid-box"}
	meta := map[string]any{"name": "box", "namespace": "team", "uid": "uid-box"}
	at := time.Date(2026, 5, 1, 12, 30, 15, 999, time.FixedZone("x", 3600)) // 999 ns past the second: stamped as the next one (rounded up)
	for _, tc := range []struct {
		name    string
		write   func() error
		manager string
		body    map[string]any
	}{
		{"SetRunning", func() error { return w.SetRunning(context.Background(), k) }, sandboxv1beta1.FieldManagerOperatingMode,
			map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": meta, "spec": map[string]any{"operatingMode": "Running"}}},
		{"ReportActivity", func() error { return w.ReportActivity(context.Background(), k, at) }, sandboxv1beta1.FieldManagerActivity,
			map[string]any{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": map[string]any{
				"name": "box", "namespace": "team", "uid": "uid-box", "annotations": map[string]any{sandboxv1beta1.AnnotationLastActivity: "2026-05-01T11:30:16Z"}}}},
	} {
		if err := tc.write(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		a := <-got
		if a.method != http.MethodPatch || a.path != "/apis/agents.x-k8s.io/v1beta1/namespaces/team/sandboxes/box" ||
			a.contentType != "application/apply-patch+yaml" || a.manager != tc.manager || a.force != "true" {
			t.Errorf("%s: %+v", tc.name, a)
		}
		if diff := cmp.Diff(tc.body, a.body); diff != "" {
			t.Errorf("%s body (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestIsGone(t *testing.T) {
	gr := schema.GroupResource{Group: sandboxv1beta1.GroupName, Resource: "sandboxes"}
	gk := schema.GroupKind{Group: sandboxv1beta1.GroupName, Kind: "Sandbox"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewNotFound(gr, "box"), true},
		{apierrors.NewConflict(gr, "box", errors.New("uid mismatch: the provided object specified uid x, and no existing object was found")), true},
		{apierrors.NewInvalid(gk, "box", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")}), true},
		{apierrors.NewInvalid(gk, "box", field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "x", "bad")}), false},
		{apierrors.NewForbidden(gr, "box", errors.New("no")), false},
		{apierrors.NewServiceUnavailable("later"), false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		wrapped := tc.err
		if wrapped != nil {
			wrapped = fmt.Errorf("resuming sandbox team/box: %w", tc.err)
		}
		if got := IsGone(wrapped); got != tc.want {
			t.Errorf("IsGone(%v) = %v, want %v", wrapped, got, tc.want)
		}
	}
}
