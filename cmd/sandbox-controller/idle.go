package main

import (
	"fmt"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/controllers"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
)

// idleWorkers is how many Sandboxes idle suspend looks at at once: each
// look is a cache read, and a suspend one request.
const idleWorkers = 4

// setupIdleSuspend registers idle suspend (the agents.x-k8s.io/idle-timeout
// annotation), with an engine of its own: its writes are under the field
// manager that resume on connect (router, SDK) also uses for
// spec.operatingMode, never the controller's.
func setupIdleSuspend(mgr ctrl.Manager, recorder events.EventRecorder) error {
	engine := ssa.New(mgr.GetClient(), sandboxv1beta1.FieldManagerOperatingMode, "")
	engine.Observe(metrics.ObserveChange)
	idle := &controllers.IdleReconciler{
		Client: mgr.GetClient(), Engine: engine, Recorder: recorder,
	}
	if err := idle.SetupWithManager(mgr, idleWorkers); err != nil {
		return fmt.Errorf("setting up idle suspend: %w", err)
	}
	return nil
}
