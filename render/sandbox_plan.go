package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

// SandboxPlanInputs is everything a Sandbox's plan is made from: the
// Sandbox, its children as observed in the cluster, the time, and what the
// status derivation needs. The reconciler classifies what it observes (whose
// Pod is whose); every decision on what to do with it is PlanSandbox's.
type SandboxPlanInputs struct {
	// Sandbox is the object planned for. Required.
	Sandbox *sandboxv1beta1.Sandbox
	// Pods are the Pods the Sandbox controls; more than one fails closed.
	Pods []*corev1.Pod
	// Pod is the Pod to keep: the one Pod the Sandbox controls, or (Adopt)
	// an unowned Pod with its pod name that it may take over.
	Pod *corev1.Pod
	// Adopt reports that Pod is unowned and may be adopted.
	Adopt bool
	// PodOwned is what our field manager owns of Pod
	// (corev1ac.ExtractPod(Pod, fieldManager)); nil: nothing, or not
	// looked at because the Sandbox wants no Pod (WantsPod). A running
	// Pod keeps the spec it was created with.
	PodOwned *corev1ac.PodApplyConfiguration
	// ForeignPod is a Pod with the Sandbox's pod name that it may not take.
	ForeignPod *corev1.Pod
	// Service is the Service named after the Sandbox when it owns it or
	// may adopt it; ForeignService when it may do neither.
	Service        *corev1.Service
	ForeignService *corev1.Service
	// PVCs are the existing PersistentVolumeClaims of the volume claim
	// templates, by name.
	PVCs map[string]*corev1.PersistentVolumeClaim
	// NetworkPolicy is the NetworkPolicy named after the Sandbox
	// (SandboxNetworkPolicyName), whoever owns it; nil when there is none.
	// An earlier release made one per Sandbox; it is deleted once the
	// namespace's covers the Pod.
	NetworkPolicy *networkingv1.NetworkPolicy
	// NamespacePolicy is the NetworkPolicy named NamespaceNetworkPolicyName
	// in the Sandbox's namespace, whoever owns it; nil when there is none.
	NamespacePolicy *networkingv1.NetworkPolicy
	// ControllerNamespace is where the sandbox router runs, TemplateGone
	// that a Sandbox made from a template outlived it, NamespaceUID the
	// UID of the Sandbox's Namespace (see SandboxInputs).
	ControllerNamespace string
	TemplateGone        bool
	NamespaceUID        types.UID
	// TemplatePolicy is the state of the NetworkPolicy of the template a
	// Sandbox was made from, when that policy is what governs its Pod
	// (TemplatePolicyInPlace otherwise): a new Pod is created only once it
	// is in place (see templatePolicy).
	TemplatePolicy TemplatePolicyState
	// Expired reports that shutdownTime has passed.
	Expired bool
	// Defaults are the defaults in force for a new Pod.
	Defaults Defaults
	// ClusterDomain, Now, Previous and Reported are the status
	// derivation's (see SandboxStatusInputs).
	ClusterDomain string
	Now           metav1.Time
	Previous      []metav1.Condition
	Reported      *sandboxv1beta1.SandboxStatus
}

// PodTemplateDriftMessage is the PodTemplateDrift event's note: a running
// Pod whose spec differs from what the template now renders keeps its spec.
const PodTemplateDriftMessage = "spec.podTemplate.spec changed after the Pod was created; the running Pod keeps its spec and the change takes effect when the Pod is next created (suspend and resume the Sandbox to apply it now)"

// PlanSandbox decides everything a reconcile of a Sandbox does: which
// PVCs, Service and Pod to apply (taking over adoptable ones, keeping a
// running Pod's spec), which to delete, when to stop at an object in the
// way, the pod-name annotation, the Sandbox's own deletion once it expired
// with shutdownPolicy Delete, its events, and the status to report. It
// fails only without a Sandbox; anything else that cannot be done is the
// plan's Problem.
func PlanSandbox(in SandboxPlanInputs) (Plan, error) {
	sb := in.Sandbox
	if sb == nil {
		return Plan{}, errNoSandbox
	}
	p := &sandboxPlanner{in: in, sb: sb, plan: Plan{Steps: []Step{}}}
	if len(in.Pods) > 1 {
		// Fail closed: two Pods behind one identity is exactly what a
		// Sandbox must never have, and nothing tells which one is right.
		if readyReason(sb) != sandboxv1beta1.ReasonMultiplePods {
			p.event(corev1.EventTypeWarning, sandboxv1beta1.ReasonMultiplePods, "Reconciling", MultiplePodsMessage(len(in.Pods)), nil, false,
				"more than one Pod: choose none, create none")
		}
		p.status(SandboxStatus(in.statusInputs()), true, "report MultiplePods")
		return p.plan, nil
	}
	pod := in.Pod
	podName := sb.Name // a new Pod is named after the Sandbox, as upstream
	defaults := in.Defaults
	if pod != nil {
		// An existing Pod keeps its name and the runtime class it was
		// created with (immutable), whatever the default is now.
		podName = pod.Name
		defaults = Defaults{RuntimeClassName: ptr.Deref(pod.Spec.RuntimeClassName, "")}
	}
	desired, err := Sandbox(SandboxInputs{
		Sandbox: sb, ServiceExists: in.Service != nil && ownedBy(in.Service, sb), PodName: podName, Expired: in.Expired, Defaults: defaults,
		ControllerNamespace: in.ControllerNamespace, TemplateGone: in.TemplateGone, NamespaceUID: in.NamespaceUID,
		// The Service requires the sandbox-uid label once the Pod has it:
		// this plan labels the Pod, the next one narrows the selector.
		LegacyServiceSelector: pod != nil && pod.Labels[sandboxv1beta1.LabelSandboxUID] != string(sb.UID),
	})
	if err != nil {
		return p.stop(err.Error()), nil
	}
	p.plan.Checks = SandboxChecks(sb, desired, in.newChildren(desired))
	if in.Expired && sb.Spec.ShutdownPolicy != nil && *sb.Spec.ShutdownPolicy == sandboxv1beta1.ShutdownPolicyDelete {
		// One step, guarded by the resourceVersion the expiry was judged
		// on as well as the UID: a shutdownTime extended (or a policy
		// changed to Retain) since then fails the delete, with nothing
		// else done (the Pod and Service go with the Sandbox, by garbage
		// collection), and the next reconcile judges the Sandbox as it is.
		p.add(Step{Action: ActionDelete, Kind: "Sandbox", Namespace: sb.Namespace, Name: sb.Name,
			Reason:        "expired with shutdownPolicy Delete",
			Preconditions: &Preconditions{UID: sb.UID, ResourceVersion: sb.ResourceVersion},
			Propagation:   ptr.To(metav1.DeletePropagationBackground), Live: sb})
		return p.plan, nil
	}
	if !p.pvcs(desired) || !p.service(desired) || !p.networkPolicy(desired) || !p.templatePolicy(desired) {
		return p.plan, nil
	}
	drift := p.pod(desired)
	if !in.Expired && !p.holdPod {
		p.podName()
	}
	if drift {
		// Reported by an event only: upstream's status has no place for it.
		p.event(corev1.EventTypeWarning, sandboxv1beta1.EventPodTemplateDrift, "Reconcile", PodTemplateDriftMessage, nil, true,
			"the running Pod's spec differs from the template")
	}
	p.status(SandboxStatus(in.statusInputs()), false, "report status once nothing changed")
	if st := sb.Spec.ShutdownTime; st != nil && !in.Expired {
		p.plan.RecheckAt = st.DeepCopy()
	}
	return p.plan, nil
}

// SandboxStatusOnFailure is the status of a Sandbox whose plan was not
// carried out: reconcileError is the error met (an API error, a conflict),
// policyDenied the denial of its checks. An unowned Service was not taken.
func SandboxStatusOnFailure(in SandboxPlanInputs, reconcileError, policyDenied string) *sandboxac.SandboxApplyConfiguration {
	s := in.statusInputs()
	s.Service = in.Service != nil && ownedBy(in.Service, in.Sandbox)
	s.Error, s.PolicyDenied = reconcileError, policyDenied
	return SandboxStatus(s)
}

func (in SandboxPlanInputs) statusInputs() SandboxStatusInputs {
	sb := in.Sandbox
	wantService := sb.Spec.Service != nil && *sb.Spec.Service
	s := SandboxStatusInputs{
		Sandbox: sb, Pod: in.Pod, ForeignPod: in.ForeignPod, Pods: len(in.Pods),
		// An unowned Service is taken only when spec.service asks for one.
		Service: in.Service != nil && (ownedBy(in.Service, sb) || wantService),
		Expired: in.Expired, ClusterDomain: in.ClusterDomain, Now: in.Now,
		Previous: in.Previous, Reported: in.Reported,
	}
	if in.Adopt {
		// Not the Sandbox's until the plan takes it over; while suspended
		// it is not taken at all.
		s.Pod = nil
		if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
			s.ForeignPod = in.Pod
		}
	}
	return s
}

// newChildren says which rendered children the plan creates or adopts.
func (in SandboxPlanInputs) newChildren(desired SandboxDesired) NewChildren {
	c := NewChildren{Pod: in.Pod == nil && in.ForeignPod == nil, Service: in.Service == nil, PVCs: map[string]bool{}}
	if in.Adopt && desired.Pod != nil {
		c.Adopt = in.Pod
	}
	for _, want := range desired.PVCs {
		if in.PVCs[*want.Name] == nil {
			c.PVCs[*want.Name] = true
		}
	}
	c.NetworkPolicy = in.NamespacePolicy == nil
	return c
}

type sandboxPlanner struct {
	in   SandboxPlanInputs
	sb   *sandboxv1beta1.Sandbox
	plan Plan
	// holdPod: a new Pod waits (templatePolicy).
	holdPod bool
}

func (p *sandboxPlanner) add(s Step) { p.plan.Steps = append(p.plan.Steps, s) }

func (p *sandboxPlanner) event(typ, reason, action, message string, related *corev1.Pod, once bool, why string) {
	e := &Event{Type: typ, Reason: reason, Action: action, Message: message, Once: once}
	if related != nil {
		e.Related, e.RelatedObject = "Pod/"+related.Name, related
	}
	p.add(Step{Action: ActionEvent, Kind: "Sandbox", Namespace: p.sb.Namespace, Name: p.sb.Name, Reason: why, Event: e})
}

func (p *sandboxPlanner) status(st *sandboxac.SandboxApplyConfiguration, immediate bool, why string) {
	p.add(Step{Action: ActionStatus, Kind: "Sandbox", Namespace: p.sb.Namespace, Name: p.sb.Name, Reason: why,
		Object: st, Immediate: immediate, Live: p.sb})
}

// stop ends the plan at a problem only a user can fix: it is reported in
// status at once, and nothing after it is done.
func (p *sandboxPlanner) stop(problem string) Plan {
	p.plan.Problem = problem
	p.status(SandboxStatusOnFailure(p.in, problem, ""), true, "report the problem")
	return p.plan
}

// pvcs plans the PVCs, in template order: created, kept, or adopted when
// unowned and adoptable. It reports false when one is in the way.
func (p *sandboxPlanner) pvcs(desired SandboxDesired) bool {
	for _, want := range desired.PVCs {
		step := Step{Action: ActionApply, Kind: "PersistentVolumeClaim", Namespace: p.sb.Namespace, Name: *want.Name,
			Reason: "create PVC", Object: want}
		switch live := p.in.PVCs[*want.Name]; {
		case live == nil:
		case ownedBy(live, p.sb):
			step.Reason, step.Live = "keep PVC as rendered", live
		case Adoptable(live, p.sb):
			step.Action, step.Reason, step.Live = ActionApplyForce, "adopt unowned PVC", live
		default:
			p.stop(notTaken("PVC", live, p.sb))
			return false
		}
		p.add(step)
	}
	return true
}

// service plans the headless Service: created, kept, adopted, or deleted
// when spec.service is false or the Sandbox expired. It reports false when
// one is in the way.
func (p *sandboxPlanner) service(desired SandboxDesired) bool {
	in, sb := p.in, p.sb
	svc := in.Service
	switch {
	case desired.Service != nil && in.ForeignService != nil:
		p.stop(notTaken("service", in.ForeignService, sb))
		return false
	case desired.Service != nil && svc != nil && !ownedBy(svc, sb) &&
		svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != "":
		p.stop(clusterIPInTheWay(svc))
		return false
	case desired.Service != nil:
		step := Step{Action: ActionApply, Kind: "Service", Namespace: sb.Namespace, Name: *desired.Service.Name,
			Reason: "create headless Service", Object: desired.Service}
		switch {
		case svc == nil:
		case ownedBy(svc, sb):
			step.Reason, step.Live = "keep headless Service as rendered", svc
		default:
			step.Action, step.Reason, step.Live = ActionApplyForce, "adopt unowned Service", svc
		}
		p.add(step)
	case desired.DeleteService && svc != nil && ownedBy(svc, sb):
		why := "spec.service is false"
		if in.Expired {
			why = "expired"
		}
		p.add(Step{Action: ActionDelete, Kind: "Service", Namespace: svc.Namespace, Name: svc.Name,
			Reason: "delete Service: " + why, Preconditions: &Preconditions{UID: svc.UID}, Live: svc})
	}
	return true
}

// pod plans the Pod: deleted when none should run, created, or kept with
// the spec it was created with (taken over when adoptable). It reports
// whether the template drifted from a kept Pod's spec.
func (p *sandboxPlanner) pod(desired SandboxDesired) bool {
	in, sb := p.in, p.sb
	live := in.Pod
	switch {
	case desired.Pod == nil && live != nil && !in.Adopt:
		why := "suspended"
		if in.Expired {
			why = "expired"
		}
		if live.DeletionTimestamp != nil {
			why += " (already terminating: nothing is sent)"
		}
		p.add(Step{Action: ActionDelete, Kind: "Pod", Namespace: live.Namespace, Name: live.Name,
			Reason: "delete Pod: " + why, Preconditions: &Preconditions{UID: live.UID}, Live: live})
	case desired.Pod != nil && in.ForeignPod != nil:
		// Reported in status; creating would fail on the name.
	case desired.Pod != nil && live != nil:
		// Pods are mostly immutable: keep the spec we applied at creation
		// and update only metadata. A template change waits for the next Pod.
		var owned *corev1ac.PodSpecApplyConfiguration
		if in.PodOwned != nil {
			owned = in.PodOwned.Spec
		}
		drift := owned != nil && !apiequality.Semantic.DeepEqual(owned, desired.Pod.Spec)
		kept := *desired.Pod
		kept.Spec = owned
		step := Step{Action: ActionApply, Kind: "Pod", Namespace: sb.Namespace, Name: *kept.Name,
			Reason: "keep the Pod's spec (frozen), apply its metadata", Object: &kept, Live: live}
		if drift {
			step.Reason = "keep the running Pod's spec (frozen) though the template changed, apply its metadata"
		}
		if in.Adopt {
			step.Action, step.Reason = ActionApplyForce, "adopt unowned Pod, keeping its spec"
		}
		p.add(step)
		if in.Adopt {
			p.event(corev1.EventTypeNormal, sandboxv1beta1.EventSandboxAdopted, "Adopt", "adopted Pod "+live.Name, live, false, "the Pod was adopted")
		}
		return drift
	case desired.Pod != nil && !p.holdPod:
		p.add(Step{Action: ActionApply, Kind: "Pod", Namespace: sb.Namespace, Name: *desired.Pod.Name,
			Reason: "create Pod", Object: desired.Pod})
	}
	return false
}

// podName plans the agents.x-k8s.io/pod-name annotation as upstream keeps
// it: the name of the Pod the Sandbox created or adopted; removed while
// suspended, and when the name is held by a Pod another controller owns;
// left alone while an unowned Pod is in the way.
func (p *sandboxPlanner) podName() {
	in, sb := p.in, p.sb
	want, why := "", ""
	switch {
	case sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
		why = "suspended: no Pod to name"
	case in.ForeignPod != nil && metav1.GetControllerOfNoCopy(in.ForeignPod) == nil:
		return
	case in.ForeignPod != nil:
		why = "the name is held by a Pod another controller owns"
	case in.Pod != nil:
		want, why = in.Pod.Name, "name the Pod kept"
	default:
		want, why = sb.Name, "name the Pod created"
	}
	have, ok := sb.Annotations[sandboxv1beta1.AnnotationPodName]
	if (want == "" && !ok) || (want != "" && have == want) {
		return
	}
	ac := sandboxac.Sandbox(sb.Name, sb.Namespace).WithUID(sb.UID)
	var remove []string
	if want != "" {
		ac.WithAnnotations(map[string]string{sandboxv1beta1.AnnotationPodName: want})
	} else {
		remove = []string{sandboxv1beta1.AnnotationPodName}
	}
	p.add(Step{Action: ActionAnnotate, Kind: "Sandbox", Namespace: sb.Namespace, Name: sb.Name, Reason: why,
		Object: ac, Remove: remove, Live: sb})
}

func readyReason(sb *sandboxv1beta1.Sandbox) string {
	for _, c := range sb.Status.Conditions {
		if c.Type == sandboxv1beta1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}
