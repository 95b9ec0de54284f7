package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/apply/eventgate"
)

// eventRecorders sends the controllers' Events (events.k8s.io/v1) through
// a gate that holds each one while the controller's own writes are in
// flight or ended less than --event-quiet ago, at most --event-hold-max
// (eventgate); one refused because its
// namespace is being deleted is logged at V(1), not as an error
// (eventgate.SkipGoneNamespaces). It wraps cfg so the gate
// sees those writes: call it before anything builds a client from cfg.
// stop sends what is held and flushes the broadcaster; call it after the
// manager has stopped. The gate is returned for more to hold Events
// (Gate.HoldWhile).
func eventRecorders(cfg *rest.Config, scheme *k8sruntime.Scheme, maxHold, quiet time.Duration, logger logr.Logger) (recorder func(string) events.EventRecorder, gate *eventgate.Gate, stop func(), err error) {
	gate = eventgate.New(maxHold)
	gate.Quiet = quiet
	cfg.Wrap(gate.Track)
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("events client: %w", err)
	}
	broadcaster := events.NewBroadcaster(gate.Sink(eventgate.SkipGoneNamespaces(&events.EventSinkImpl{Interface: clientset.EventsV1()})))
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logger))
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("starting the events broadcaster: %w", err)
	}
	stopLogging, err := broadcaster.StartLogging(logger.V(1))
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("logging events: %w", err)
	}
	stop = func() {
		gate.Close()
		broadcaster.Shutdown()
		stopLogging()
		cancel()
	}
	return func(name string) events.EventRecorder { return broadcaster.NewRecorder(scheme, name) }, gate, stop, nil
}
