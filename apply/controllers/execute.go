package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/api/convert"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// execute carries out one object step of a plan through the engine:
// apply, apply-force, create, adopt, delete and annotate, each a server-side
// apply (a create one that only a missing object lets through,
// Engine.Create) but for a guarded delete. It decides nothing: the step
// says what to write and to which object; whether a request is needed is
// the engine's diff. Status and event steps are the reconciler's (they go
// through its memory of what it last wrote and reported).
func execute(ctx context.Context, e *ssa.Engine, s render.Step) (ssa.Change, error) {
	switch s.Action {
	case render.ActionApply, render.ActionApplyForce:
		// A step for an object the plan saw none of creates it and
		// writes to no namesake the cache has not shown yet (ssa
		// Options.CreateOnly): someone else's PVC or Pod of that name is
		// judged by the next plan, never taken over by a stale one.
		opts := ssa.Options{Force: s.Action == render.ActionApplyForce, CreateOnly: s.Live == nil}
		switch ac := s.Object.(type) {
		case *corev1ac.PodApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*corev1.Pod](s.Live), corev1ac.ExtractPod, opts)
		case *corev1ac.ServiceApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*corev1.Service](s.Live), corev1ac.ExtractService, opts)
		case *corev1ac.PersistentVolumeClaimApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*corev1.PersistentVolumeClaim](s.Live), corev1ac.ExtractPersistentVolumeClaim, opts)
		case *networkingv1ac.NetworkPolicyApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*networkingv1.NetworkPolicy](s.Live), networkingv1ac.ExtractNetworkPolicy, opts)
		case *extac.SandboxTemplateApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*extv1beta1.SandboxTemplate](s.Live), extac.ExtractSandboxTemplate, opts)
		case *extac.SandboxClaimApplyConfiguration:
			return ssa.Apply(ctx, e, s.Kind, ac, liveAs[*extv1beta1.SandboxClaim](s.Live), extac.ExtractSandboxClaim, opts)
		}
	case render.ActionCreate:
		// Only an object that does not exist is created: one that does
		// is unchanged (Engine.Create), never overwritten.
		if _, ok := s.Object.(*sandboxac.SandboxApplyConfiguration); ok {
			_, c, _, err := createSandbox(ctx, e, s)
			return c, err
		}
	case render.ActionAdopt:
		if _, ok := s.Object.(*sandboxac.SandboxApplyConfiguration); ok {
			_, c, err := adoptSandbox(ctx, e, s)
			return c, err
		}
	case render.ActionDelete:
		obj, ok := s.Live.(client.Object)
		if !ok || s.Preconditions == nil || obj.GetUID() != s.Preconditions.UID {
			break // the engine guards every delete by the UID of the object it is given
		}
		var opts []client.DeleteOption
		if s.Propagation != nil {
			opts = append(opts, client.PropagationPolicy(*s.Propagation))
		}
		if rv := s.Preconditions.ResourceVersion; rv != "" {
			opts = append(opts, client.Preconditions{ResourceVersion: &rv})
		}
		return e.Delete(ctx, s.Kind, obj, opts...)
	case render.ActionAnnotate:
		return annotate(ctx, e, s)
	}
	return ssa.Change{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name},
		fmt.Errorf("plan step %s %s %s cannot be executed", s.Action, s.Kind, s.Name)
}

// createSandbox carries out a Sandbox create step. It returns the Sandbox
// as the API server returned it when created, else as the step has it, and
// whether one of its name existed already (then nothing was written).
func createSandbox(ctx context.Context, e *ssa.Engine, s render.Step) (*sandboxv1beta1.Sandbox, ssa.Change, bool, error) {
	ac, ok := s.Object.(*sandboxac.SandboxApplyConfiguration)
	if !ok {
		return nil, ssa.Change{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name}, false, fmt.Errorf("plan step %s %s %s holds %T", s.Action, s.Kind, s.Name, s.Object)
	}
	sb := &sandboxv1beta1.Sandbox{}
	c, exists, err := e.Create(ctx, s.Kind, ac, sb)
	if exists || err != nil {
		// Nothing was created: the Sandbox as the step has it.
		if cerr := convert.JSON(ac, sb); cerr != nil && err == nil {
			err = fmt.Errorf("converting %s %s: %w", s.Kind, s.Name, cerr)
		}
	}
	return sb, c, exists, err
}

// adoptSandbox carries out an adopt step: the step's apply configuration,
// applied with our field manager and forced (the merge patch it replaces
// set the claim's ownership, labels and annotations whatever held them;
// an adoption refused over a label someone else set would leave the claim
// retrying the member), carrying the member's resourceVersion as its
// precondition (a mismatch fails with a Conflict, apierrors.IsConflict).
// It returns the Sandbox as the API server returned it.
func adoptSandbox(ctx context.Context, e *ssa.Engine, s render.Step) (*sandboxv1beta1.Sandbox, ssa.Change, error) {
	ac, _ := s.Object.(*sandboxac.SandboxApplyConfiguration)
	c, err := ssa.Apply(ctx, e, s.Kind, ac, liveAs[*sandboxv1beta1.Sandbox](s.Live), sandboxac.ExtractSandbox, ssa.Options{Force: true})
	if err != nil {
		return nil, c, err
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := convert.JSON(ac, sb); err != nil {
		return nil, c, fmt.Errorf("reading the adopted Sandbox %s: %w", s.Name, err)
	}
	return sb, c, nil
}

// liveAs is the observed object of a step as its type, a nil one when there
// is none.
func liveAs[O runtime.Object](o runtime.Object) O {
	v, _ := o.(O)
	return v
}
