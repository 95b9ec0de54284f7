// Package runtimeclass resolves the runtime class a Sandbox's Pod gets when
// its pod template names none (--default-runtime-class): auto, the first
// class of the runtime-isolation allowlist that the cluster has, followed
// through the manager's cache so a class installed later is used for new
// Pods; none; or a class named outright. The resolved default reaches the
// Pod only through render.Defaults: this package never writes an object,
// and it never changes a Sandbox, a template or a Pod that exists.
package runtimeclass
