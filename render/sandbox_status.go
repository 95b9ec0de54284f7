package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// Condition type and reason we add to the public API: a running Pod that no
// longer matches spec.podTemplate.spec (Pods are mostly immutable, so the
// change waits for the next Pod).
const (
	ConditionPodTemplateCurrent = "PodTemplateCurrent"
	ReasonPodTemplateChanged    = "PodTemplateChanged"
)

// SandboxStatusInputs are the observations a Sandbox's status is derived from.
type SandboxStatusInputs struct {
	// Sandbox whose status is rendered.
	Sandbox *sandboxv1beta1.Sandbox
	// Previous are the conditions last reported, which provide the last
	// transition times of conditions whose status did not change; nil means
	// the Sandbox's own status.conditions.
	Previous []metav1.Condition
	// Pod is the Pod the Sandbox owns, nil when there is none.
	Pod *corev1.Pod
	// ForeignPod reports a Pod with the Sandbox's pod name that it does not own.
	ForeignPod bool
	// MultiplePods reports more than one Pod owned by the Sandbox.
	MultiplePods bool
	// Service reports that the Sandbox's own Service exists.
	Service bool
	// ServiceRequired reports that spec.service is true.
	ServiceRequired bool
	// Expired reports that shutdownTime has passed.
	Expired bool
	// PodTemplateDrift, when not empty, says how the running Pod differs from
	// the template.
	PodTemplateDrift string
	// Error, when not empty, is a reconcile error to report as ReconcilerError.
	Error string
	// PolicyDenied, when not empty, says which policy refused what the
	// Sandbox would create; nothing was applied.
	PolicyDenied string
	// ClusterDomain is the cluster's DNS domain (e.g. cluster.local).
	ClusterDomain string
	// Now stamps conditions whose status changed.
	Now metav1.Time
}

// SandboxStatus renders a Sandbox's status as an apply configuration holding
// only status: every field the controller owns, so fields that no longer
// apply (podIPs after suspend, say) are removed by applying it.
func SandboxStatus(in SandboxStatusInputs) *sandboxac.SandboxApplyConfiguration {
	sb := in.Sandbox
	st := sandboxac.SandboxStatus()
	previous := in.Previous
	if previous == nil {
		previous = sb.Status.Conditions
	}
	conds := conditionSet{existing: previous, generation: sb.Generation, now: in.Now}

	pod := in.Pod
	ready, reason, message := readiness(in)
	conds.set(sandboxv1beta1.ConditionReady, ready, reason, message)
	conds.set(suspended(in))

	if pod != nil && !in.MultiplePods {
		if pc := podCondition(pod, corev1.PodScheduled); pc != nil {
			r := pc.Reason
			if r == "" {
				r = "PodScheduled"
			}
			conds.set(sandboxv1beta1.ConditionPodScheduled, metav1.ConditionStatus(pc.Status), r, pc.Message)
		}
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			conds.set(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodSucceeded, "the Pod ran to completion")
		case corev1.PodFailed:
			conds.set(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodFailed, podFailure(pod))
		}
		if in.PodTemplateDrift != "" {
			conds.set(ConditionPodTemplateCurrent, metav1.ConditionFalse, ReasonPodTemplateChanged, in.PodTemplateDrift)
		}
	}
	st.WithConditions(conds.out...)

	if in.Expired || in.MultiplePods {
		return sandboxac.Sandbox(sb.Name, sb.Namespace).WithStatus(st)
	}
	if in.Service {
		st.WithService(sb.Name).WithServiceFQDN(fmt.Sprintf("%s.%s.svc.%s", sb.Name, sb.Namespace, in.ClusterDomain))
	}
	if pod != nil {
		st.WithLabelSelector(sandboxv1beta1.LabelSandboxNameHash + "=" + NameHash(sb.Name))
		for _, ip := range pod.Status.PodIPs {
			st.WithPodIPs(ip.IP)
		}
		if len(pod.Status.PodIPs) == 0 && pod.Status.PodIP != "" {
			st.WithPodIPs(pod.Status.PodIP)
		}
		if pod.Spec.NodeName != "" {
			st.WithNodeName(pod.Spec.NodeName)
		}
	}
	return sandboxac.Sandbox(sb.Name, sb.Namespace).WithStatus(st)
}

func readiness(in SandboxStatusInputs) (metav1.ConditionStatus, string, string) {
	pod := in.Pod
	switch {
	case in.MultiplePods:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonMultiplePods,
			"more than one Pod is owned by this Sandbox; the controller changes nothing until only one remains"
	case in.Expired:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired, "the Sandbox passed its shutdownTime"
	case in.PolicyDenied != "":
		return metav1.ConditionFalse, sandboxv1beta1.ReasonPolicyDenied, in.PolicyDenied
	case in.Error != "":
		return metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError, in.Error
	case in.Sandbox.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, "the Sandbox is suspended"
	case in.ForeignPod && pod == nil:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady,
			fmt.Sprintf("a Pod named %s exists that this Sandbox does not own; label it %s=%s to let the Sandbox adopt it, or delete it",
				PodName(in.Sandbox), sandboxv1beta1.LabelAdoptable, sandboxv1beta1.AdoptableValue)
	case pod == nil:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady, "the Pod does not exist yet"
	case pod.Status.Phase == corev1.PodSucceeded:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonPodSucceeded, "the Pod ran to completion"
	case pod.Status.Phase == corev1.PodFailed:
		return metav1.ConditionFalse, sandboxv1beta1.ReasonPodFailed, podFailure(pod)
	}
	var missing []string
	if pod.Status.Phase != corev1.PodRunning {
		missing = append(missing, fmt.Sprintf("the Pod is %s", phase(pod)))
	} else if c := podCondition(pod, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		missing = append(missing, "the Pod is not Ready")
	}
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		missing = append(missing, "the Pod has no IP")
	}
	if in.ServiceRequired && !in.Service {
		missing = append(missing, "the Service does not exist yet")
	}
	if len(missing) > 0 {
		return metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady, joinSentences(missing)
	}
	return metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady, "the Pod is running and ready"
}

func suspended(in SandboxStatusInputs) (string, metav1.ConditionStatus, string, string) {
	const t = sandboxv1beta1.ConditionSuspended
	if in.Sandbox.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonNotSuspended, "the Sandbox is not suspended"
	}
	switch {
	case in.Pod != nil && in.Pod.Status.Phase == corev1.PodUnknown:
		return t, metav1.ConditionUnknown, sandboxv1beta1.ReasonPodStateUnknown, "the state of the Pod is unknown"
	case in.Pod != nil:
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonPodTerminating, "the Pod is being deleted"
	case in.ForeignPod:
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonPodNotOwned,
			fmt.Sprintf("a Pod named %s exists that this Sandbox does not own, so it is not deleted", PodName(in.Sandbox))
	}
	return t, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated, "the Pod is deleted; the Service and PVCs are kept"
}

func phase(p *corev1.Pod) string {
	if p.Status.Phase == "" {
		return "Pending"
	}
	return string(p.Status.Phase)
}

func podFailure(p *corev1.Pod) string {
	if p.Status.Message != "" {
		return "the Pod failed: " + p.Status.Message
	}
	return "the Pod failed"
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func joinSentences(parts []string) string {
	out := parts[0]
	for _, p := range parts[1:] {
		out += "; " + p
	}
	return out
}

// conditionSet builds conditions, keeping the last transition time of a
// condition whose status did not change.
type conditionSet struct {
	existing   []metav1.Condition
	generation int64
	now        metav1.Time
	out        []*metav1ac.ConditionApplyConfiguration
}

func (c *conditionSet) set(t string, status metav1.ConditionStatus, reason, message string) {
	ltt := c.now
	for _, e := range c.existing {
		if e.Type == t && e.Status == status {
			ltt = e.LastTransitionTime
		}
	}
	c.out = append(c.out, metav1ac.Condition().
		WithType(t).WithStatus(status).WithReason(reason).WithMessage(message).
		WithObservedGeneration(c.generation).WithLastTransitionTime(ltt))
}
