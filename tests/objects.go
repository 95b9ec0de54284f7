package tests

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Sandbox is the suites' standard Sandbox: one gvisor container with an
// http port and a Service; mutate adjusts it.
func Sandbox(ns, name string, mutate ...func(*sandboxv1beta1.Sandbox)) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			Service: ptr.To(true),
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				RuntimeClassName: ptr.To("gvisor"),
				Containers: []corev1.Container{{
					Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8888}},
				}},
			}},
		}},
	}
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

// Template is the suites' standard SandboxTemplate (one gvisor container).
func Template(ns, name string) *extv1beta1.SandboxTemplate {
	return &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
			RuntimeClassName: ptr.To("gvisor"),
			Containers:       []corev1.Container{{Name: "agent", Image: "python:3.13-slim", Ports: []corev1.ContainerPort{{ContainerPort: 8888}}}},
		}}},
	}
}

// WarmPool is a pool of replicas members of template.
func WarmPool(ns, name, template string, replicas int32) *extv1beta1.SandboxWarmPool {
	return &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(replicas), TemplateRef: extv1beta1.SandboxTemplateRef{Name: template}},
	}
}

// Claim claims a Sandbox from pool; mutate adjusts it.
func Claim(ns, name, pool string, mutate ...func(*extv1beta1.SandboxClaim)) *extv1beta1.SandboxClaim {
	c := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// WaitFor polls check every 100ms until it returns nil, and returns how
// long that took; after timeout it fails the test with the last error.
func WaitFor(t *testing.T, timeout time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	return WaitForEvery(t, 100*time.Millisecond, timeout, what, check)
}

// WaitForEvery is WaitFor polling every interval (checks that list
// hundreds of objects poll less often).
func WaitForEvery(t *testing.T, interval, timeout time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}
