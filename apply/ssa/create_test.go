package ssa

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestRefusesCreateOnly: only an API server refusing the create by apply
// itself makes Create fall back; the object's own refusals (invalid,
// forbidden, the name taken) and transport errors do not.
func TestRefusesCreateOnly(t *testing.T) {
	gr := schema.GroupResource{Group: "agents.x-k8s.io", Resource: "sandboxes"}
	status := func(code int32, reason metav1.StatusReason, msg string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no apply patches", status(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format"), true},
		{"a version on a create, 500", status(http.StatusInternalServerError, metav1.StatusReasonInternalError, "resourceVersion should not be set on objects to be created"), true},
		{"a version on a create, 400, wrapped", fmt.Errorf("creating: %w", status(http.StatusBadRequest, metav1.StatusReasonBadRequest, "resourceVersion should not be set on objects to be created")), true},
		{"the name taken", apierrors.NewConflict(gr, "box", errors.New("the object has been modified")), false},
		{"an invalid object naming the version", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Sandbox"}, "box",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), "x", "bad")}), false},
		{"forbidden", apierrors.NewForbidden(gr, "box", errors.New("namespace is being terminated")), false},
		{"another 500", status(http.StatusInternalServerError, metav1.StatusReasonInternalError, "etcdserver: request timed out"), false},
		{"transport", errors.New("read: connection reset by peer (resourceVersion)"), false},
	} {
		if got := refusesCreateOnly(tc.err); got != tc.want {
			t.Errorf("%s: refusesCreateOnly(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
