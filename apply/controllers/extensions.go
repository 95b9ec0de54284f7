package controllers

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// ExtensionsOptions configure the SandboxTemplate, SandboxWarmPool and
// SandboxClaim controllers.
type ExtensionsOptions struct {
	Engine *ssa.Engine
	// Tracer, if set, traces claim reconciles (ClaimReconciler.Tracer).
	Tracer trace.TracerProvider
	// ControllerNamespace is where the controller and the sandbox router run.
	ControllerNamespace string
	// Defaults are what the Pods of Sandboxes made from a template get
	// where it leaves a field unset, as the Sandbox reconciler renders them.
	Defaults render.DefaultsSource
	// Policy holds the policies checked before anything is created.
	Policy *policy.Holder
	// Workers per controller.
	TemplateWorkers, WarmPoolWorkers, ClaimWorkers int
	// WarmPoolMaxBatch caps the members a pool creates in one pass.
	WarmPoolMaxBatch int
	// WarmPoolGrace is how long a member may take to become Ready before
	// its pool reports it.
	WarmPoolGrace time.Duration
	// Sandboxes, if set, is the Sandbox reconciler: it is told which
	// claims wait for warm members (SandboxReconciler.Claims).
	Sandboxes *SandboxReconciler
	// Recorders, if set, makes each controller's event recorder (by its
	// reporting controller name); the default is the manager's.
	Recorders func(name string) events.EventRecorder
}

// Extensions are the running extension controllers.
type Extensions struct {
	Templates *TemplateReconciler
	WarmPools *WarmPoolReconciler
	Claims    *ClaimReconciler
	Queue     *WarmQueue
}

// SetupExtensions registers the indexes, the warm-member queue and the three
// extension controllers with the manager.
func SetupExtensions(mgr ctrl.Manager, o ExtensionsOptions) (*Extensions, error) {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &sandboxv1beta1.Sandbox{}, IndexController, controllerKey); err != nil {
		return nil, fmt.Errorf("indexing sandboxes by controller: %w", err)
	}
	if err := idx.IndexField(ctx, &extv1beta1.SandboxWarmPool{}, extv1beta1.IndexTemplateRef, func(o client.Object) []string {
		return []string{o.(*extv1beta1.SandboxWarmPool).Spec.TemplateRef.Name}
	}); err != nil {
		return nil, fmt.Errorf("indexing warm pools by template: %w", err)
	}
	if err := idx.IndexField(ctx, &extv1beta1.SandboxClaim{}, extv1beta1.IndexWarmPoolRef, func(o client.Object) []string {
		return []string{o.(*extv1beta1.SandboxClaim).Spec.WarmPoolRef.Name}
	}); err != nil {
		return nil, fmt.Errorf("indexing claims by warm pool: %w", err)
	}

	queue := NewWarmQueue()
	informer, err := mgr.GetCache().GetInformer(ctx, &sandboxv1beta1.Sandbox{})
	if err != nil {
		return nil, fmt.Errorf("getting the sandbox informer: %w", err)
	}
	if _, err := informer.AddEventHandler(queue.Handler()); err != nil {
		return nil, fmt.Errorf("watching warm members: %w", err)
	}
	indexed, ok := informer.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the sandbox informer %T has no indexer", informer)
	}
	sandboxIndexer := indexed.GetIndexer()
	claims, err := mgr.GetCache().GetInformer(ctx, &extv1beta1.SandboxClaim{})
	if err != nil {
		return nil, fmt.Errorf("getting the claim informer: %w", err)
	}
	if _, err := claims.AddEventHandler(queue.ClaimHandler()); err != nil {
		return nil, fmt.Errorf("watching waiting claims: %w", err)
	}

	if o.Sandboxes != nil {
		o.Sandboxes.Claims = queue
		queue.SetWake(o.Sandboxes.wake)
	}
	recorder := o.Recorders
	if recorder == nil {
		recorder = func(name string) events.EventRecorder { return mgr.GetEventRecorder(name) }
	}
	x := &Extensions{
		Queue: queue,
		Templates: &TemplateReconciler{
			Client: mgr.GetClient(), Engine: o.Engine, ControllerNamespace: o.ControllerNamespace,
			Policy: o.Policy, Recorder: recorder("sandbox-template-controller"), Defaults: o.Defaults,
		},
		WarmPools: &WarmPoolReconciler{
			Client: mgr.GetClient(), Engine: o.Engine, Recorder: recorder("sandbox-warmpool-controller"),
			Defaults: o.Defaults, MaxBatch: o.WarmPoolMaxBatch, Grace: o.WarmPoolGrace, Queue: queue,
			Policy: o.Policy, SandboxIndexer: sandboxIndexer,
		},
		Claims: &ClaimReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Engine: o.Engine,
			Recorder: recorder("sandbox-claim-controller"), Queue: queue, Defaults: o.Defaults,
			Policy: o.Policy, Tracer: o.Tracer, SandboxIndexer: sandboxIndexer,
		},
	}
	if err := x.Templates.SetupWithManager(mgr, max(o.TemplateWorkers, 1)); err != nil {
		return nil, fmt.Errorf("setting up the SandboxTemplate controller: %w", err)
	}
	if err := x.WarmPools.SetupWithManager(mgr, max(o.WarmPoolWorkers, 1)); err != nil {
		return nil, fmt.Errorf("setting up the SandboxWarmPool controller: %w", err)
	}
	if err := x.Claims.SetupWithManager(mgr, max(o.ClaimWorkers, 1)); err != nil {
		return nil, fmt.Errorf("setting up the SandboxClaim controller: %w", err)
	}
	return x, nil
}
