package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/agentsandbox/reconciler/render"
)

// podDefaults are the defaults a Sandbox's Pod is rendered with. A Pod that
// exists keeps the runtime class it was created with (the field is
// immutable), whatever the default is now: a template that names none is
// no drift, and nothing is recreated.
func (r *SandboxReconciler) podDefaults(pod *corev1.Pod) render.Defaults {
	if pod != nil {
		return render.Defaults{RuntimeClassName: ptr.Deref(pod.Spec.RuntimeClassName, "")}
	}
	return render.CurrentDefaults(r.Defaults)
}
