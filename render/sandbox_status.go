package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// SandboxStatusInputs are the observations a Sandbox's status is derived from.
//
// The status is the public controller's (kubernetes-sigs/agent-sandbox),
// field for field and text for text: clients compare the whole status, so
// only situations upstream does not cover (a policy denial) add anything.
type SandboxStatusInputs struct {
	// Sandbox whose status is rendered.
	Sandbox *sandboxv1beta1.Sandbox
	// Previous are the conditions last reported, which provide the last
	// transition times of conditions whose status did not change and, once
	// the Sandbox expired, the conditions kept as they were; nil means the
	// Sandbox's own status.conditions.
	Previous []metav1.Condition
	// Reported is the status last reported, whose service, serviceFQDN and
	// selector are kept where the controller does not look at them again
	// (more than one Pod; selector once set); nil means the Sandbox's own
	// status.
	Reported *sandboxv1beta1.SandboxStatus
	// Pod is the Pod the Sandbox owns, nil when there is none.
	Pod *corev1.Pod
	// ForeignPod is a Pod with the Sandbox's pod name that it does not own
	// and does not adopt in this pass, nil when there is none.
	ForeignPod *corev1.Pod
	// Pods is the number of Pods controlled by the Sandbox; more than one
	// is reported as MultiplePods and nothing is chosen.
	Pods int
	// Service reports that the Sandbox's Service exists: owned, or adopted
	// because spec.service is true.
	Service bool
	// Expired reports that shutdownTime has passed.
	Expired bool
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
	reported := in.Reported
	if reported == nil {
		reported = &sb.Status
	}
	conds := conditionSet{existing: previous, generation: sb.Generation, now: in.Now}
	out := sandboxac.Sandbox(sb.Name, sb.Namespace).WithStatus(st)

	if in.Expired {
		// Upstream stops computing conditions once a Sandbox expired: Ready
		// says so, PodScheduled goes, Finished and Suspended stay as last
		// reported, and every other field is cleared. (A condition type
		// only an earlier version of this controller wrote goes too.)
		conds.set(sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired, "Sandbox has expired")
		for _, c := range previous {
			switch c.Type {
			case sandboxv1beta1.ConditionSuspended, sandboxv1beta1.ConditionFinished:
				conds.keep(c)
			}
		}
		st.WithConditions(conds.out...)
		return out
	}

	multiple := in.Pods > 1
	pod := in.Pod
	if multiple {
		pod = nil
	}
	suspendedMode := sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended
	// Upstream's "pod lookup failed": no Pod to report on, and no proof
	// there is none.
	podUnknown := multiple || (!suspendedMode && pod == nil && in.ForeignPod != nil)

	ready, reason, message := readiness(in, pod, podUnknown)
	conds.set(sandboxv1beta1.ConditionReady, ready, reason, message)
	conds.set(suspended(in, pod, podUnknown))
	switch {
	case podUnknown:
		conds.set(sandboxv1beta1.ConditionPodScheduled, metav1.ConditionUnknown, sandboxv1beta1.ReasonPodSchedulingUnknown,
			"Pod state is unknown. Pod scheduling cannot be determined")
	case pod != nil:
		if pc := podCondition(pod, corev1.PodScheduled); pc != nil {
			r := pc.Reason
			if r == "" && pc.Status == corev1.ConditionTrue {
				r = sandboxv1beta1.ReasonPodScheduled
			} else if r == "" {
				r = sandboxv1beta1.ReasonPodSchedulingUnknown
			}
			conds.set(sandboxv1beta1.ConditionPodScheduled, metav1.ConditionStatus(pc.Status), r, pc.Message)
		} else {
			conds.set(sandboxv1beta1.ConditionPodScheduled, metav1.ConditionUnknown, sandboxv1beta1.ReasonPodSchedulingUnknown,
				"Pod has not reported a PodScheduled condition yet")
		}
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			conds.set(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodSucceeded, "Pod completed successfully")
		case corev1.PodFailed:
			conds.set(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodFailed, "Pod failed")
		}
	}
	st.WithConditions(conds.out...)

	switch {
	case multiple:
		// The Service is not looked at while the Pods are ambiguous: what
		// was reported stays.
		if reported.Service != "" {
			st.WithService(reported.Service)
		}
		if reported.ServiceFQDN != "" {
			st.WithServiceFQDN(reported.ServiceFQDN)
		}
	case serviceExists(in):
		st.WithService(sb.Name).WithServiceFQDN(fmt.Sprintf("%s.%s.svc.%s", sb.Name, sb.Namespace, in.ClusterDomain))
	}
	// The selector is set once a Pod (owned, or a foreign one while
	// suspended) has been seen, and kept until the Sandbox expires.
	if (pod != nil || (suspendedMode && in.ForeignPod != nil && !multiple)) || reported.LabelSelector != "" {
		st.WithLabelSelector(sandboxv1beta1.LabelSandboxNameHash + "=" + NameHash(sb.Name))
	}
	if pod != nil {
		for _, ip := range pod.Status.PodIPs {
			st.WithPodIPs(ip.IP)
		}
		if pod.Spec.NodeName != "" {
			st.WithNodeName(pod.Spec.NodeName)
		}
	}
	return out
}

// serviceExists reports a Service to name in status: it exists and
// spec.service does not say there should be none.
func serviceExists(in SandboxStatusInputs) bool {
	s := in.Sandbox.Spec.Service
	return in.Service && (s == nil || *s)
}

// serviceRequired reports a Ready that waits for the Service: spec.service
// is true, or unset while an owned Service exists.
func serviceRequired(in SandboxStatusInputs) bool {
	if s := in.Sandbox.Spec.Service; s != nil {
		return *s
	}
	return in.Service
}

// foreignPodError is upstream's reconcile error for a Pod with the
// Sandbox's pod name that the Sandbox may not take.
func foreignPodError(sb *sandboxv1beta1.Sandbox, p *corev1.Pod) string {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		return fmt.Sprintf("pod %q is owned by %s/%s (UID: %s), not by sandbox %q", p.Name, ref.Kind, ref.Name, ref.UID, sb.Name)
	}
	return fmt.Sprintf("cannot adopt unowned pod %q: missing required pool authorization label (%q) or sandbox tracking label (%q)",
		p.Name, sandboxv1beta1.LabelAdoptable, sandboxv1beta1.LabelSandboxNameHash)
}

func readiness(in SandboxStatusInputs, pod *corev1.Pod, podUnknown bool) (metav1.ConditionStatus, string, string) {
	sb := in.Sandbox
	if in.Pods > 1 {
		return metav1.ConditionFalse, sandboxv1beta1.ReasonMultiplePods, MultiplePodsMessage(in.Pods)
	}
	if in.PolicyDenied != "" {
		return metav1.ConditionFalse, sandboxv1beta1.ReasonPolicyDenied, in.PolicyDenied
	}
	var errs []string
	if podUnknown && in.ForeignPod != nil {
		errs = append(errs, foreignPodError(sb, in.ForeignPod))
	}
	if in.Error != "" {
		errs = append(errs, in.Error)
	}
	if len(errs) > 0 {
		return metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError, "Error seen: " + strings.Join(errs, "\n")
	}
	if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		if pod != nil || in.ForeignPod != nil {
			return metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, "Sandbox is suspending"
		}
		return metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, "Sandbox is suspended"
	}
	if pod != nil {
		switch pod.Status.Phase {
		case corev1.PodSucceeded:
			return metav1.ConditionFalse, sandboxv1beta1.ReasonPodSucceeded, "Pod completed successfully"
		case corev1.PodFailed:
			return metav1.ConditionFalse, sandboxv1beta1.ReasonPodFailed, "Pod failed"
		}
	}
	message, podReady := "Pod does not exist", false
	if pod != nil {
		message = "Pod exists with phase: " + string(pod.Status.Phase)
		if pod.Status.Phase == corev1.PodRunning {
			message = "Pod is Running but not Ready"
			if c := podCondition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
				if len(pod.Status.PodIPs) == 0 {
					message = "Pod is Ready but has no podIPs yet"
				} else {
					message, podReady = "Pod is Ready", true
				}
			}
		}
	}
	serviceReady := true
	if serviceRequired(in) {
		serviceReady = serviceExists(in)
		if serviceReady {
			message += "; Service Exists"
		} else {
			message += "; Service does not exist"
		}
	}
	if podReady && serviceReady {
		return metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady, message
	}
	return metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady, message
}

// MultiplePodsMessage is the Ready message, and the event note, for a
// Sandbox that controls n > 1 Pods.
func MultiplePodsMessage(n int) string {
	return fmt.Sprintf("multiple Pods (%d) are controlled by this Sandbox; refusing to choose or create a Pod", n)
}

func suspended(in SandboxStatusInputs, pod *corev1.Pod, podUnknown bool) (string, metav1.ConditionStatus, string, string) {
	const t = sandboxv1beta1.ConditionSuspended
	if in.Sandbox.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonNotSuspended, "Sandbox is not suspended"
	}
	switch {
	case podUnknown:
		return t, metav1.ConditionUnknown, sandboxv1beta1.ReasonPodStateUnknown, "Pod state is unknown. Sandbox suspension cannot be confirmed"
	case pod != nil:
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonPodTerminating, "Pod is terminating. Sandbox is suspending"
	case in.ForeignPod != nil:
		return t, metav1.ConditionFalse, sandboxv1beta1.ReasonPodNotOwned, "Refused to delete pod because it is not owned by this sandbox"
	}
	return t, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated, "Pod has been terminated. Sandbox is suspended"
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
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

// keep reports a condition exactly as it was last reported.
func (c *conditionSet) keep(e metav1.Condition) {
	c.out = append(c.out, metav1ac.Condition().
		WithType(e.Type).WithStatus(e.Status).WithReason(e.Reason).WithMessage(e.Message).
		WithObservedGeneration(e.ObservedGeneration).WithLastTransitionTime(e.LastTransitionTime))
}
