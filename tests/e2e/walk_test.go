package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Upstream's texts (kubernetes-sigs/agent-sandbox, /work/shared/UPSTREAM-STATUS.md),
// by the contract's row.
const (
	msgNotSuspended   = "Sandbox is not suspended"                                      // S-S1
	msgPodTerminated  = "Pod has been terminated. Sandbox is suspended"                 // S-S3
	msgPodNotOwned    = "Refused to delete pod because it is not owned by this sandbox" // S-S4
	msgPodTerminating = "Pod is terminating. Sandbox is suspending"                     // S-S5
	msgSuspending     = "Sandbox is suspending"                                         // S-R3
	msgSuspended      = "Sandbox is suspended"                                          // S-R4
	msgReadyService   = "Pod is Ready; Service Exists"                                  // S-R12, spec.service true
	msgReady          = "Pod is Ready"                                                  // S-R12, no Service
	msgExpired        = "Sandbox has expired"                                           // S-R13
	msgPodSucceeded   = "Pod completed successfully"                                    // S-F1
	msgClaimExpired   = "Claim expired. Sandbox cleanup initiated."                     // C-R1/C-R2
)

const (
	annPodName     = sandboxv1beta1.AnnotationPodName
	annTemplateRef = sandboxv1beta1.AnnotationSandboxTemplateRef
	annObserved    = extv1beta1.AnnotationControllerFirstObservedAt
	annFirstReady  = extv1beta1.AnnotationClaimFirstReadyAt
	annSandboxName = extv1beta1.AnnotationSandboxName
)

// Sandbox conditions at a generation.
func sbReady(gen int64, s metav1.ConditionStatus, reason, msg string) cond {
	return condOf(sandboxv1beta1.ConditionReady, s, reason, msg, gen)
}

func sbSuspended(gen int64, s metav1.ConditionStatus, reason, msg string) cond {
	return condOf(sandboxv1beta1.ConditionSuspended, s, reason, msg, gen)
}

// sbScheduled is S-P1 for a Pod the scheduler placed: True, reason
// PodScheduled, empty message.
func sbScheduled(gen int64) cond {
	return condOf(sandboxv1beta1.ConditionPodScheduled, metav1.ConditionTrue, sandboxv1beta1.ReasonPodScheduled, "", gen)
}

// readySandbox is a Running, Ready Sandbox at gen (S-R12): the Pod's IPs
// and node, the selector, and the Service when it has one.
func readySandbox(ns, name string, gen int64, service bool, ann map[string]string) sandboxView {
	v := sandboxView{
		Conditions: []cond{
			sbReady(gen, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady, msgReady),
			sbSuspended(gen, metav1.ConditionFalse, sandboxv1beta1.ReasonNotSuspended, msgNotSuspended),
			sbScheduled(gen),
		},
		Selector: sandboxv1beta1.LabelSandboxNameHash + "=" + nameHash(name), PodIPs: true, NodeName: true,
		Annotations: ann,
	}
	if service {
		v.Conditions[0].Message = msgReadyService
		v.Service, v.ServiceFQDN = name, fmt.Sprintf("%s.%s.svc.cluster.local", name, ns)
	}
	return v
}

// TestStatusWalk walks a Sandbox, claims and warm pools through their
// lifecycles on the local cluster and compares, at every resting point,
// the whole status a client sees (and the annotations upstream writes)
// with upstream's, per the contract in UPSTREAM-STATUS.md.
func TestStatusWalk(t *testing.T) {
	t.Run("sandbox", func(t *testing.T) { t.Parallel(); walkSandbox(t) })
	t.Run("finished", func(t *testing.T) { t.Parallel(); walkFinished(t) })
	t.Run("claims", func(t *testing.T) { t.Parallel(); walkClaims(t) })
}

// walkSandbox: create, suspend (Pod held terminating, then gone, then a
// foreign Pod in the way), resume, expire with Retain, then Delete.
func walkSandbox(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	const name = "walk"
	key := types.NamespacedName{Namespace: ns, Name: name}
	ready := func(gen int64) sandboxView {
		return readySandbox(ns, name, gen, true, map[string]string{annPodName: name})
	}
	// suspendedView is the suspended Sandbox: the Service and the selector
	// stay (selector: upstream clears it only on expiry); the pod-name
	// annotation goes.
	suspendedView := func(cs ...cond) sandboxView {
		v := ready(2)
		v.Conditions, v.PodIPs, v.NodeName, v.Annotations = cs, false, false, nil
		return v
	}
	is := func(v sandboxView) []expectation { return []expectation{sandboxIs(c, ns, name, v)} }
	podGone := isGone(c, ns, name, &corev1.Pod{})

	walk(t, time.Minute, []step{{
		name: "created: Ready",
		act:  func(t *testing.T) { create(t, c, sandbox(ns, name)) },
		want: func() []expectation { return is(ready(1)) },
	}, {
		name: "suspended, the Pod held terminating by a finalizer",
		act: func(t *testing.T) {
			setFinalizer(t, c, key, true)
			releaseOnCleanup(t, c, key)
			setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended)
		},
		want: func() []expectation {
			v := ready(2)
			v.Conditions = []cond{
				sbReady(2, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, msgSuspending),
				sbSuspended(2, metav1.ConditionFalse, sandboxv1beta1.ReasonPodTerminating, msgPodTerminating),
				sbScheduled(2),
			}
			v.Annotations = nil
			return append(is(v), podTerminating(c, key))
		},
	}, {
		name: "suspended, the Pod gone",
		act:  func(t *testing.T) { setFinalizer(t, c, key, false) },
		want: func() []expectation {
			return append(is(suspendedView(
				sbReady(2, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, msgSuspended),
				sbSuspended(2, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated, msgPodTerminated),
			)), podGone)
		},
	}, {
		name: "suspended, a foreign Pod with the Sandbox's name and name-hash label",
		act:  func(t *testing.T) { create(t, c, foreignPod(ns, name)) },
		want: func() []expectation {
			return is(suspendedView(
				sbReady(2, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, msgSuspending),
				sbSuspended(2, metav1.ConditionFalse, sandboxv1beta1.ReasonPodNotOwned, msgPodNotOwned),
			))
		},
	}, {
		name: "suspended, the foreign Pod deleted",
		act:  func(t *testing.T) { deleteObject(t, c, foreignPod(ns, name)) },
		want: func() []expectation {
			return append(is(suspendedView(
				sbReady(2, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxSuspended, msgSuspended),
				sbSuspended(2, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated, msgPodTerminated),
			)), podGone)
		},
	}, {
		name: "resumed: Ready",
		act:  func(t *testing.T) { setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning) },
		want: func() []expectation { return is(ready(3)) },
	}, {
		// S-R13: Ready says so at the new generation; Suspended stays as
		// last computed (generation 3); everything else is cleared.
		name: "expired, shutdownPolicy Retain",
		act: func(t *testing.T) {
			past := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
			update(t, c, key, &sandboxv1beta1.Sandbox{}, func(sb *sandboxv1beta1.Sandbox) {
				sb.Spec.ShutdownTime = &past
				sb.Spec.ShutdownPolicy = ptr.To(sandboxv1beta1.ShutdownPolicyRetain)
			})
		},
		want: func() []expectation {
			return append(is(sandboxView{
				Conditions: []cond{
					sbReady(4, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired, msgExpired),
					sbSuspended(3, metav1.ConditionFalse, sandboxv1beta1.ReasonNotSuspended, msgNotSuspended),
				},
				Annotations: map[string]string{annPodName: name},
			}), podGone, isGone(c, ns, name, &corev1.Service{}))
		},
	}, {
		name: "expired, shutdownPolicy Delete: the Sandbox goes",
		act: func(t *testing.T) {
			update(t, c, key, &sandboxv1beta1.Sandbox{}, func(sb *sandboxv1beta1.Sandbox) {
				sb.Spec.ShutdownPolicy = ptr.To(sandboxv1beta1.ShutdownPolicyDelete)
			})
		},
		want: func() []expectation { return []expectation{isGone(c, ns, name, &sandboxv1beta1.Sandbox{})} },
	}})
}

// walkFinished: a Sandbox whose Pod succeeds reports Finished (S-F1, S-R5),
// and keeps it, as last computed, once it expired and its Pod is gone (S-F4).
func walkFinished(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	const name = "done"
	key := types.NamespacedName{Namespace: ns, Name: name}
	finished := func() sandboxView {
		v := readySandbox(ns, name, 1, true, map[string]string{annPodName: name})
		v.Conditions[0] = sbReady(1, metav1.ConditionFalse, sandboxv1beta1.ReasonPodSucceeded, msgPodSucceeded)
		v.Conditions = append(v.Conditions, condOf(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodSucceeded, msgPodSucceeded, 1))
		return v
	}
	walk(t, time.Minute, []step{{
		name: "created: Ready",
		act:  func(t *testing.T) { create(t, c, sandbox(ns, name)) },
		want: func() []expectation {
			return []expectation{sandboxIs(c, ns, name, readySandbox(ns, name, 1, true, map[string]string{annPodName: name}))}
		},
	}, {
		name: "the Pod succeeded: Finished",
		act: func(t *testing.T) {
			updateStatus(t, c, key, &corev1.Pod{}, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
		},
		want: func() []expectation { return []expectation{sandboxIs(c, ns, name, finished())} },
	}, {
		name: "expired, shutdownPolicy Retain: Finished and Suspended kept",
		act: func(t *testing.T) {
			past := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
			update(t, c, key, &sandboxv1beta1.Sandbox{}, func(sb *sandboxv1beta1.Sandbox) { sb.Spec.ShutdownTime = &past })
		},
		want: func() []expectation {
			return []expectation{sandboxIs(c, ns, name, sandboxView{
				Conditions: []cond{
					sbReady(2, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired, msgExpired),
					sbSuspended(1, metav1.ConditionFalse, sandboxv1beta1.ReasonNotSuspended, msgNotSuspended),
					condOf(sandboxv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodSucceeded, msgPodSucceeded, 1),
				},
				Annotations: map[string]string{annPodName: name},
			}), isGone(c, ns, name, &corev1.Pod{}), isGone(c, ns, name, &corev1.Service{})}
		},
	}})
}

// walkClaims: two pools of one template (two warm members, Recreate; and
// none), a claim that takes a warm member, one that cold-starts, one whose
// Pod finishes (TTL 0, Retain), the warm claim's expiry with Delete, and a
// template change the pool rolls out.
func walkClaims(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	const tpl = "tpl"
	poolSelector := func(pool string) string { return sandboxv1beta1.LabelWarmPoolSandbox + "=" + nameHash(pool) }
	// Ours only (contract §3: upstream's pool status has no conditions).
	poolConds := func(ready, want int32) []cond {
		return []cond{
			condOf(extv1beta1.ConditionReady, metav1.ConditionTrue, extv1beta1.ReasonWarmPoolReady, fmt.Sprintf("%d of %d members are Ready", ready, want), 1),
			condOf(extv1beta1.ConditionProgressing, metav1.ConditionTrue, extv1beta1.ReasonMembersProgressing, "members become Ready", 1),
		}
	}
	fullPool := func(name string, n int32) expectation {
		return poolIs(c, ns, name, poolView{Replicas: n, ReadyReplicas: n, Selector: poolSelector(name), ObservedGeneration: 1, Conditions: poolConds(n, n)})
	}
	// readyClaim is a claim forwarding its Sandbox's Ready (C-R15) with
	// upstream's annotations (§2.5). sandbox-name on a cold claim is ours
	// (the contract's "extra (cold)"): upstream writes it for warm claims only.
	readyClaim := func(sandbox string) claimView {
		return claimView{
			Conditions: []cond{condOf(extv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady, msgReady, 1)},
			Sandbox:    sandbox, PodIPs: true,
			Annotations: map[string]string{annObserved: utcTime, annFirstReady: utcTime, annSandboxName: sandbox},
		}
	}
	claimSandbox := func(name string, gen int64) sandboxView {
		return readySandbox(ns, name, gen, false, map[string]string{annPodName: name, annTemplateRef: tpl})
	}
	var warm string      // the member the warm claim took
	var warmGen int64    // its generation once taken
	var members []string // the warm pool's members before the rollout

	walk(t, time.Minute, []step{{
		name: "pools filled",
		act: func(t *testing.T) {
			warmPool := e2ePool(ns, "warm", tpl, 2)
			warmPool.Spec.UpdateStrategy = &extv1beta1.UpdateStrategy{Type: extv1beta1.UpdateStrategyRecreate}
			create(t, c, e2eTemplate(ns, tpl), warmPool, e2ePool(ns, "cold", tpl, 0))
		},
		want: func() []expectation { return []expectation{fullPool("warm", 2), fullPool("cold", 0)} },
	}, {
		name: "a claim takes a warm member; the pool refills",
		act: func(t *testing.T) {
			before, err := poolMembers(c, ns, "warm")
			if err != nil {
				t.Fatal(err)
			}
			create(t, c, e2eClaim(ns, "w", "warm"))
			warm = boundSandbox(t, c, ns, "w")
			if _, ok := before[warm]; !ok {
				t.Fatalf("claim w took %s, not one of the pool's Ready members %v", warm, before)
			}
			sb := &sandboxv1beta1.Sandbox{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: warm}, sb); err != nil {
				t.Fatal(err)
			}
			warmGen = sb.Generation
		},
		want: func() []expectation {
			return []expectation{claimIs(c, ns, "w", readyClaim(warm)), sandboxIs(c, ns, warm, claimSandbox(warm, warmGen)), fullPool("warm", 2)}
		},
	}, {
		name: "a claim on the empty pool cold-starts a Sandbox named after it",
		act:  func(t *testing.T) { create(t, c, e2eClaim(ns, "c", "cold")) },
		want: func() []expectation {
			return []expectation{claimIs(c, ns, "c", readyClaim("c")), sandboxIs(c, ns, "c", claimSandbox("c", 1)), fullPool("cold", 0)}
		},
	}, {
		// C-R1/C-R2, C-F1/C-F4: Finished mirrored verbatim from the
		// Sandbox (its generation), kept after the Sandbox is gone;
		// status.sandbox cleared once it is gone.
		name: "a claim whose Pod succeeded expires at once (ttlSecondsAfterFinished 0, Retain)",
		act: func(t *testing.T) {
			create(t, c, e2eClaim(ns, "job", "cold", func(cl *extv1beta1.SandboxClaim) {
				cl.Spec.Lifecycle = &extv1beta1.Lifecycle{TTLSecondsAfterFinished: ptr.To[int32](0), ShutdownPolicy: extv1beta1.ShutdownPolicyRetain}
			}))
			waitFor(t, time.Minute, "claim job Ready", claimReady(c, ns, "job"))
			updateStatus(t, c, types.NamespacedName{Namespace: ns, Name: "job"}, &corev1.Pod{}, func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodSucceeded
			})
		},
		want: func() []expectation {
			return []expectation{claimIs(c, ns, "job", claimView{
				Conditions: []cond{
					condOf(extv1beta1.ConditionReady, metav1.ConditionFalse, extv1beta1.ReasonClaimExpired, msgClaimExpired, 1),
					condOf(extv1beta1.ConditionFinished, metav1.ConditionTrue, sandboxv1beta1.ReasonPodSucceeded, msgPodSucceeded, 1),
				},
				Annotations: map[string]string{annObserved: utcTime, annFirstReady: utcTime, annSandboxName: "job"},
			}), isGone(c, ns, "job", &sandboxv1beta1.Sandbox{})}
		},
	}, {
		name: "the warm claim expires with shutdownPolicy Delete: claim and Sandbox go",
		act: func(t *testing.T) {
			past := metav1.NewTime(time.Now().Add(-time.Second).Truncate(time.Second))
			update(t, c, types.NamespacedName{Namespace: ns, Name: "w"}, &extv1beta1.SandboxClaim{}, func(cl *extv1beta1.SandboxClaim) {
				cl.Spec.Lifecycle = &extv1beta1.Lifecycle{ShutdownTime: &past, ShutdownPolicy: extv1beta1.ShutdownPolicyDelete}
			})
		},
		want: func() []expectation {
			return []expectation{isGone(c, ns, "w", &extv1beta1.SandboxClaim{}), isGone(c, ns, warm, &sandboxv1beta1.Sandbox{})}
		},
	}, {
		name: "a template change rolls the Recreate pool; claimed Sandboxes stay",
		act: func(t *testing.T) {
			before, err := poolMembers(c, ns, "warm")
			if err != nil {
				t.Fatal(err)
			}
			members = slices.Collect(maps.Keys(before))
			update(t, c, types.NamespacedName{Namespace: ns, Name: tpl}, &extv1beta1.SandboxTemplate{}, func(st *extv1beta1.SandboxTemplate) {
				st.Spec.PodTemplate.Spec.Containers[0].Image = "python:3.14-slim"
			})
		},
		want: func() []expectation {
			return []expectation{rolled(c, ns, "warm", members), fullPool("warm", 2), claimIs(c, ns, "c", readyClaim("c"))}
		},
	}})
}
