package eventgate

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
)

// SkipGoneNamespaces wraps the sink an events broadcaster writes through so
// that an Event the API server refuses because its namespace is being
// deleted, or is gone, counts as sent: the object it is about goes with the
// namespace, and the broadcaster would otherwise log each one as an error
// (deleting a namespace full of claims logged one per claim). It is logged
// at V(1) instead. Every other error is returned as it came.
func SkipGoneNamespaces(next events.EventSink) events.EventSink {
	return goneSink{next: next}
}

type goneSink struct{ next events.EventSink }

func (s goneSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.next.Create(ctx, ev)
	return out, skipGone(ctx, ev, err)
}

func (s goneSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.next.Update(ctx, ev)
	return out, skipGone(ctx, ev, err)
}

func (s goneSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.next.Patch(ctx, old, data)
	return out, skipGone(ctx, old, err)
}

// skipGone returns err, or nil when it says that ev's namespace is being
// deleted (NamespaceLifecycle's Forbidden with the NamespaceTerminating
// cause) or does not exist (NotFound of the namespace).
func skipGone(ctx context.Context, ev *eventsv1.Event, err error) error {
	if err == nil || !namespaceGone(err) {
		return err
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Event not recorded: its namespace is being deleted or is gone",
		"namespace", ev.Namespace, "reason", ev.Reason, "regarding", ev.Regarding.Kind+"/"+ev.Regarding.Name, "error", err.Error())
	return nil
}

// namespaceGone reports an error of a write refused because its namespace
// is being deleted or is gone.
func namespaceGone(err error) bool {
	if apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	if apierrors.IsNotFound(err) && errors.As(err, &status) {
		d := status.Status().Details
		return d != nil && d.Kind == "namespaces" && d.Group == ""
	}
	return false
}
