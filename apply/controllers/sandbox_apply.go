package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/metrics"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// applyChildren renders the Sandbox and applies the difference. It returns
// what changed and, for a running Pod that no longer matches the template, a
// description of the drift.
func (r *SandboxReconciler) applyChildren(ctx context.Context, sb *sandboxv1beta1.Sandbox, obs *observed, expired bool) (ssa.ChangeSet, string, error) {
	// A new Pod is named after the Sandbox, as upstream: the pod-name
	// annotation only tracks an existing (adopted) Pod.
	podName := sb.Name
	if obs.pod != nil {
		podName = obs.pod.Name
	}
	began := time.Now()
	desired, err := render.Sandbox(render.SandboxInputs{
		Sandbox: sb, ServiceExists: obs.service != nil && ownedBy(obs.service, sb), PodName: podName, Expired: expired,
		Defaults: r.podDefaults(obs.pod),
	})
	metrics.RenderSeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
	if err != nil {
		// The spec cannot be rendered: retrying will not help until it changes.
		return nil, "", &terminalError{err.Error()}
	}
	if set := r.Policy.Get(); set != nil {
		c := creating{pod: obs.pod == nil && obs.foreignPod == nil, service: obs.service == nil, pvcs: map[string]bool{}}
		if obs.adopt && desired.Pod != nil {
			// The Pod was admitted as someone else's: a Sandbox takes it
			// over only if it would have been allowed to create it.
			c.adopt = obs.pod
		}
		for _, want := range desired.PVCs {
			if obs.pvcs[*want.Name] == nil {
				c.pvcs[*want.Name] = true
			}
		}
		began := time.Now()
		inNS, _ := r.Policy.In(ctx, sb.Namespace)
		ds, err := checkSandbox(inNS, set, sb, desired, c)
		metrics.PolicySeconds.WithLabelValues("Sandbox").Observe(time.Since(began).Seconds())
		if err != nil {
			return nil, "", err
		}
		if warned := policy.Warned(ds); len(warned) > 0 && r.Recorder != nil {
			// The namespace's mode lets it through with a warning (the
			// webhook showed the same at kubectl apply time).
			r.Recorder.Eventf(sb, nil, corev1.EventTypeWarning, EventPolicyWarning, "Check", "%s", policy.Summary(warned))
		}
	}
	var changes ssa.ChangeSet
	record := func(c ssa.Change, err error) error {
		changes = append(changes, c)
		return err
	}

	for _, want := range desired.PVCs {
		live := obs.pvcs[*want.Name]
		if live != nil && !ownedBy(live, sb) && !adoptable(live, sb) {
			return changes, "", &terminalError{notTaken("PVC", live, sb)}
		}
		adopt := live != nil && !ownedBy(live, sb)
		if err := record(ssa.Apply(ctx, r.Engine, "PersistentVolumeClaim", want, live, corev1ac.ExtractPersistentVolumeClaim, ssa.Options{Force: adopt})); err != nil {
			return changes, "", err
		}
	}

	switch {
	case desired.Service != nil && obs.foreignSvc != nil:
		return changes, "", &terminalError{notTaken("service", obs.foreignSvc, sb)}
	case desired.Service != nil && obs.service != nil && !ownedBy(obs.service, sb) &&
		obs.service.Spec.ClusterIP != corev1.ClusterIPNone && obs.service.Spec.ClusterIP != "":
		return changes, "", &terminalError{fmt.Sprintf("cannot adopt service %q: ClusterIP is %q (expected %q, field is immutable)",
			obs.service.Name, obs.service.Spec.ClusterIP, corev1.ClusterIPNone)}
	case desired.Service != nil:
		var svc *corev1.Service
		adopt := false
		if obs.service != nil {
			svc, adopt = obs.service, !ownedBy(obs.service, sb)
		}
		if err := record(ssa.Apply(ctx, r.Engine, "Service", desired.Service, svc, corev1ac.ExtractService, ssa.Options{Force: adopt})); err != nil {
			return changes, "", err
		}
	case desired.DeleteService && obs.service != nil && ownedBy(obs.service, sb):
		if err := record(r.Engine.Delete(ctx, "Service", obs.service)); err != nil {
			return changes, "", err
		}
	}

	drift := ""
	switch {
	case desired.Pod == nil && obs.pod != nil && !obs.adopt:
		if err := record(r.Engine.Delete(ctx, "Pod", obs.pod)); err != nil {
			return changes, "", err
		}
	case desired.Pod != nil && obs.foreignPod != nil:
		// Reported in status; creating would fail on the name.
	case desired.Pod != nil && obs.pod != nil:
		// Pods are mostly immutable: keep the spec we applied at creation and
		// update only metadata. A template change waits for the next Pod.
		owned, err := corev1ac.ExtractPod(obs.pod, r.Engine.FieldManager())
		if err != nil {
			return changes, "", fmt.Errorf("extracting pod fields: %w", err)
		}
		if owned.Spec != nil && !apiequality.Semantic.DeepEqual(owned.Spec, desired.Pod.Spec) {
			drift = "spec.podTemplate.spec changed after the Pod was created; the running Pod keeps its spec and the change takes effect when the Pod is next created (suspend and resume the Sandbox to apply it now)"
		}
		desired.Pod.Spec = owned.Spec
		if err := record(ssa.Apply(ctx, r.Engine, "Pod", desired.Pod, obs.pod, corev1ac.ExtractPod, ssa.Options{Force: obs.adopt})); err != nil {
			return changes, "", err
		}
		if obs.adopt {
			r.Recorder.Eventf(sb, obs.pod, corev1.EventTypeNormal, sandboxv1beta1.EventSandboxAdopted, "Adopt", "adopted Pod %s", obs.pod.Name)
		}
	case desired.Pod != nil:
		if err := record(ssa.Apply(ctx, r.Engine, "Pod", desired.Pod, (*corev1.Pod)(nil), corev1ac.ExtractPod, ssa.Options{})); err != nil {
			return changes, "", err
		}
	}
	return changes, drift, nil
}

// trackPodName keeps the agents.x-k8s.io/pod-name annotation as upstream
// writes it: the name of the Pod the Sandbox created or adopted; removed
// while suspended, and when the name is held by a Pod another controller
// owns. It runs after the children were applied without error.
func (r *SandboxReconciler) trackPodName(ctx context.Context, sb *sandboxv1beta1.Sandbox, obs *observed) error {
	want := ""
	switch {
	case sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
	case obs.foreignPod != nil && metav1.GetControllerOf(obs.foreignPod) == nil:
		return nil // upstream leaves it while an unowned Pod is in the way
	case obs.foreignPod != nil:
	case obs.pod != nil:
		want = obs.pod.Name
	default:
		want = sb.Name // the Pod just created
	}
	have, ok := sb.Annotations[sandboxv1beta1.AnnotationPodName]
	if (want == "" && !ok) || (want != "" && have == want) {
		return nil
	}
	m := r.recall(sb)
	now := r.Clock.Now()
	if m != nil && m.podName == want && now.Sub(m.podNameAt) < ssa.CreateExpectation {
		return nil // patched moments ago; the cache has not shown it yet
	}
	var value any
	if want != "" {
		value = want
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{sandboxv1beta1.AnnotationPodName: value}}})
	if err != nil {
		return err
	}
	if _, err := r.Engine.Patch(ctx, "Sandbox", sb, client.RawPatch(types.MergePatchType, body), r.Engine.FieldManager()); err != nil {
		return client.IgnoreNotFound(err)
	}
	next := memo{uid: sb.UID}
	if m != nil {
		next = *m
	}
	next.podName, next.podNameAt = want, now
	r.memory.Store(client.ObjectKeyFromObject(sb), &next)
	return nil
}
