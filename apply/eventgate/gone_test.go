package eventgate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// failingSink answers every write with err.
type failingSink struct{ err error }

func (s failingSink) Create(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, s.err
}

func (s failingSink) Update(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, s.err
}

func (s failingSink) Patch(context.Context, *eventsv1.Event, []byte) (*eventsv1.Event, error) {
	return nil, s.err
}

// terminating is the error NamespaceLifecycle admission gives a create in
// a namespace being deleted.
func terminating(ns string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "claim-08.1",
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is being terminated", Field: "metadata.namespace"})
	return err
}

func TestSkipGoneNamespaces(t *testing.T) {
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "shrink", Name: "claim-08.1"}, Reason: "SandboxAdopted"}
	cases := []struct {
		name string
		err  error
		skip bool
	}{
		{"namespace being deleted", terminating("shrink"), true},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "shrink"), true},
		{"forbidden otherwise", apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x", errors.New("RBAC")), false},
		{"the event not found", apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "claim-08.1"), false},
		{"a namespaces resource of another group", apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "namespaces"}, "shrink"), false},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), false},
		{"no status", errors.New("connection refused"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := SkipGoneNamespaces(failingSink{err: tc.err})
			_, create := s.Create(context.Background(), ev)
			_, update := s.Update(context.Background(), ev)
			_, patch := s.Patch(context.Background(), ev, []byte("{}"))
			for verb, err := range map[string]error{"create": create, "update": update, "patch": patch} {
				if tc.skip && err != nil {
					t.Errorf("%s: %v, want it counted as sent", verb, err)
				}
				if !tc.skip && !errors.Is(err, tc.err) {
					t.Errorf("%s: %v, want %v as it came", verb, err, tc.err)
				}
			}
		})
	}
}
