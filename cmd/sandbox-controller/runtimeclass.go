package main

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/policy"
)

// runtimeClassDefaults is the one source of defaults that the reconcilers
// and the webhook share, so that both render, and judge, the same Pod. The
// isolating classes are the runtime-isolation bundle's allowlist.
func runtimeClassDefaults(o options, mgr ctrl.Manager) (*runtimeclass.Source, error) {
	log := ctrl.Log.WithName("runtime-class")
	isolating := policy.IsolatingRuntimeClasses()
	s := runtimeclass.New(o.defaultRuntimeClass, isolating, mgr.GetCache(), log)
	switch setting := s.Setting(); {
	case setting == runtimeclass.None:
		log.Info("no default runtime class (--default-runtime-class=none): a Pod runs under the class its template names, if any")
	case setting == runtimeclass.Auto:
		log.Info("default runtime class: the first of the isolating classes the cluster has", "isolating", isolating)
	case !s.Allowed(setting):
		log.Info("warning: --default-runtime-class names a class outside the runtime-isolation allowlist; that policy refuses the Pods that get it",
			"runtimeClass", setting, "isolating", isolating)
	default:
		log.Info("default runtime class", "runtimeClass", setting)
	}
	return s, s.Watch(context.Background(), mgr.GetCache())
}
