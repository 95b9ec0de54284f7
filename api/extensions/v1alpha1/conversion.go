package v1alpha1

import (
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Annotations that keep what one version cannot hold, so that round trips
// are lossless.
const (
	// AnnotationVolumeClaimTemplatesPolicy keeps a v1beta1 template's
	// volumeClaimTemplatesPolicy while it is read as v1alpha1.
	AnnotationVolumeClaimTemplatesPolicy = sandboxv1beta1.ConversionAnnotationPrefix + "volume-claim-templates-policy"
	// AnnotationTemplateRef and AnnotationWarmPool keep a v1alpha1 claim's
	// sandboxTemplateRef and warmpool, which v1beta1 folds into warmPoolRef.
	AnnotationTemplateRef = sandboxv1beta1.ConversionAnnotationPrefix + "sandbox-template-ref"
	AnnotationWarmPool    = sandboxv1beta1.ConversionAnnotationPrefix + "warmpool"
)

// ShadowPool is the pool a v1alpha1 claim without a named pool (warmpool
// none or default) maps to, as the public project's migration names it.
func ShadowPool(template string) string { return "shadow-pool-" + template }

func withAnnotation(a map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(a)+1)
	for x, y := range a {
		out[x] = y
	}
	out[k] = v
	return out
}

func withoutAnnotations(a map[string]string, keys ...string) map[string]string {
	if a == nil {
		return nil
	}
	out := make(map[string]string, len(a))
	for x, y := range a {
		out[x] = y
	}
	for _, k := range keys {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ToV1beta1 converts a v1alpha1 template; a policy kept from an earlier
// v1beta1 read comes back from its annotation.
func (in *SandboxTemplate) ToV1beta1() *extv1beta1.SandboxTemplate {
	out := &extv1beta1.SandboxTemplate{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = extv1beta1.GroupVersion.String(), "SandboxTemplate"
	s := in.Spec.DeepCopy()
	out.Spec = extv1beta1.SandboxTemplateSpec{
		PodTemplate: s.PodTemplate, VolumeClaimTemplates: s.VolumeClaimTemplates, Service: s.Service,
		NetworkPolicy: s.NetworkPolicy, NetworkPolicyManagement: s.NetworkPolicyManagement,
		EnvVarsInjectionPolicy:     s.EnvVarsInjectionPolicy,
		VolumeClaimTemplatesPolicy: extv1beta1.InjectionPolicy(in.Annotations[AnnotationVolumeClaimTemplatesPolicy]),
	}
	if out.Spec.VolumeClaimTemplatesPolicy == "" {
		out.Spec.VolumeClaimTemplatesPolicy = extv1beta1.InjectionPolicyDisallowed
	}
	out.Annotations = withoutAnnotations(out.Annotations, AnnotationVolumeClaimTemplatesPolicy)
	return out
}

// TemplateFromV1beta1 converts a hub template; volumeClaimTemplatesPolicy,
// which v1alpha1 lacks, is kept in an annotation.
func TemplateFromV1beta1(in *extv1beta1.SandboxTemplate) *SandboxTemplate {
	out := &SandboxTemplate{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.APIVersion, out.Kind = GroupVersion.String(), "SandboxTemplate"
	s := in.Spec.DeepCopy()
	out.Spec = SandboxTemplateSpec{
		PodTemplate: s.PodTemplate, VolumeClaimTemplates: s.VolumeClaimTemplates, Service: s.Service,
		NetworkPolicy: s.NetworkPolicy, NetworkPolicyManagement: s.NetworkPolicyManagement,
		EnvVarsInjectionPolicy: s.EnvVarsInjectionPolicy,
	}
	if p := s.VolumeClaimTemplatesPolicy; p != "" {
		out.Annotations = withAnnotation(out.Annotations, AnnotationVolumeClaimTemplatesPolicy, string(p))
	}
	return out
}

// ToV1beta1 converts a v1alpha1 claim: a named warmpool becomes
// warmPoolRef.name; none and default become shadow-pool-<template>. The
// original fields are kept in annotations for the way back.
func (in *SandboxClaim) ToV1beta1() *extv1beta1.SandboxClaim {
	out := &extv1beta1.SandboxClaim{ObjectMeta: *in.ObjectMeta.DeepCopy(), Status: *in.Status.DeepCopy()}
	out.APIVersion, out.Kind = extv1beta1.GroupVersion.String(), "SandboxClaim"
	s := in.Spec.DeepCopy()
	out.Spec = extv1beta1.SandboxClaimSpec{Lifecycle: s.Lifecycle, AdditionalPodMetadata: s.AdditionalPodMetadata,
		Env: s.Env, VolumeClaimTemplates: s.VolumeClaimTemplates}
	template := ""
	if s.SandboxTemplateRef != nil {
		template = s.SandboxTemplateRef.Name
		out.Annotations = withAnnotation(out.Annotations, AnnotationTemplateRef, template)
	}
	pool := s.WarmPool
	out.Annotations = withAnnotation(out.Annotations, AnnotationWarmPool, pool)
	switch pool {
	case "", WarmPoolNone, WarmPoolDefault:
		out.Spec.WarmPoolRef.Name = ShadowPool(template)
	default:
		out.Spec.WarmPoolRef.Name = pool
	}
	return out
}

// ClaimFromV1beta1 converts a hub claim, restoring the v1alpha1 fields
// from their annotations, or naming the pool in warmpool when the claim
// was written as v1beta1.
func ClaimFromV1beta1(in *extv1beta1.SandboxClaim) *SandboxClaim {
	out := &SandboxClaim{ObjectMeta: *in.ObjectMeta.DeepCopy(), Status: *in.Status.DeepCopy()}
	out.APIVersion, out.Kind = GroupVersion.String(), "SandboxClaim"
	s := in.Spec.DeepCopy()
	out.Spec = SandboxClaimSpec{Lifecycle: s.Lifecycle, AdditionalPodMetadata: s.AdditionalPodMetadata,
		Env: s.Env, VolumeClaimTemplates: s.VolumeClaimTemplates}
	if t, ok := in.Annotations[AnnotationTemplateRef]; ok {
		out.Spec.SandboxTemplateRef = &extv1beta1.SandboxTemplateRef{Name: t}
	}
	if w, ok := in.Annotations[AnnotationWarmPool]; ok {
		out.Spec.WarmPool = w
	} else {
		out.Spec.WarmPool = s.WarmPoolRef.Name
	}
	out.Annotations = withoutAnnotations(out.Annotations, AnnotationTemplateRef, AnnotationWarmPool)
	return out
}

// ToV1beta1 converts a v1alpha1 pool.
func (in *SandboxWarmPool) ToV1beta1() *extv1beta1.SandboxWarmPool {
	out := &extv1beta1.SandboxWarmPool{ObjectMeta: *in.ObjectMeta.DeepCopy(), Status: *in.Status.DeepCopy()}
	out.APIVersion, out.Kind = extv1beta1.GroupVersion.String(), "SandboxWarmPool"
	replicas := in.Spec.Replicas
	out.Spec = extv1beta1.SandboxWarmPoolSpec{Replicas: &replicas, TemplateRef: in.Spec.TemplateRef,
		UpdateStrategy: in.Spec.UpdateStrategy.DeepCopy()}
	return out
}

// PoolFromV1beta1 converts a hub pool (unset replicas is the default, 1).
func PoolFromV1beta1(in *extv1beta1.SandboxWarmPool) *SandboxWarmPool {
	out := &SandboxWarmPool{ObjectMeta: *in.ObjectMeta.DeepCopy(), Status: *in.Status.DeepCopy()}
	out.APIVersion, out.Kind = GroupVersion.String(), "SandboxWarmPool"
	out.Spec = SandboxWarmPoolSpec{Replicas: 1, TemplateRef: in.Spec.TemplateRef, UpdateStrategy: in.Spec.UpdateStrategy.DeepCopy()}
	if in.Spec.Replicas != nil {
		out.Spec.Replicas = *in.Spec.Replicas
	}
	return out
}
