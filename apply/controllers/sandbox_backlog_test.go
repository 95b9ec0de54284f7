package controllers

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

func backlogKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("sb-%d", i)}
}

func TestStatusBacklogCounts(t *testing.T) {
	var b statusBacklog
	base, now := 5*time.Second, time.Unix(1000, 0)
	for i := range busyBacklog {
		b.wait(backlogKey(i), "", base, now)
		b.wait(backlogKey(i), "", base, now) // deferred again: counted once
	}
	if b.busy(base, now) {
		t.Fatalf("busy with %d waiting", busyBacklog)
	}
	b.wait(backlogKey(busyBacklog), "", base, now)
	if !b.busy(base, now) {
		t.Fatalf("not busy with %d waiting", busyBacklog+1)
	}
	b.done(backlogKey(0))
	b.done(backlogKey(0)) // written, then forgotten: counted once
	b.done(backlogKey(9999))
	if n := b.n.Load(); n != busyBacklog {
		t.Errorf("count %d, want %d", n, busyBacklog)
	}
	// The burst's tail: still busy for busyFactor windows after the
	// backlog fell, then not.
	if !b.busy(base, now.Add(busyFactor*base-time.Millisecond)) {
		t.Errorf("not busy right after the burst")
	}
	if b.busy(base, now.Add(busyFactor*base)) {
		t.Errorf("still busy %s after the burst", busyFactor*base)
	}
}

func TestStatusBacklogHold(t *testing.T) {
	base, last := 5*time.Second, time.Unix(1000, 0)
	var quiet statusBacklog
	for _, c := range []struct {
		after, want time.Duration
	}{{0, base}, {2 * time.Second, 3 * time.Second}, {base, 0}, {time.Hour, 0}} {
		if got := quiet.hold(base, last, last.Add(c.after), false); got != c.want {
			t.Errorf("quiet, %s after the last write: hold %s, want %s", c.after, got, c.want)
		}
	}

	var burst statusBacklog
	for i := range busyBacklog + 1 {
		burst.wait(backlogKey(i), "", base, last)
	}
	for _, c := range []struct {
		after, want time.Duration
	}{
		{0, busyLook * base},                       // looked at again later
		{base, busyLook * base},                    // held past the quiet window
		{busyHold*base - time.Second, time.Second}, // up to the bound
		{busyHold * base, 0},                       // then written, burst or not
	} {
		now := last.Add(c.after)
		burst.progress(now.Add(-time.Second)) // the burst moves
		if got := burst.hold(base, last, now, false); got != c.want {
			t.Errorf("burst, %s after the last write: hold %s, want %s", c.after, got, c.want)
		}
	}
	// A Sandbox whose Pod only waits its turn is held past the bound for
	// as long as the burst moves, and written once it stalls.
	for _, after := range []time.Duration{busyHold * base, 10 * busyHold * base} {
		now := last.Add(after)
		burst.progress(now.Add(-time.Second))
		if got := burst.hold(base, last, now, true); got != busyLook*base {
			t.Errorf("burst, a Pod waiting its turn %s after the last write: hold %s, want %s", after, got, busyLook*base)
		}
	}
	if got := burst.hold(base, last, last.Add(10*busyHold*base+busyStall*base), true); got != 0 {
		t.Errorf("a stalled burst, a Pod waiting its turn: hold %s, want 0 (written)", got)
	}
}

// TestStatusBacklogLooks: with thousands held, each is looked at again
// less often, so that the looks stay at busyLooks a second.
func TestStatusBacklogLooks(t *testing.T) {
	base, last := 5*time.Second, time.Unix(1000, 0)
	var b statusBacklog
	held := 20000
	for i := range held {
		b.wait(backlogKey(i), "", base, last)
	}
	now := last.Add(time.Second)
	b.progress(now)
	want := time.Duration(held) * time.Second / busyLooks // 200 s
	if got := b.hold(base, last, now, true); got != want {
		t.Errorf("%d held, a Pod waiting its turn: hold %s, want %s", held, got, want)
	}
	if got := b.hold(base, last, now, false); got != want {
		t.Errorf("%d held, a Pod in trouble: hold %s, want %s", held, got, want)
	}
	late := last.Add(busyHold*base - time.Second)
	b.progress(late)
	if got := b.hold(base, last, late, false); got != time.Second {
		t.Errorf("%d held, a Pod in trouble near the bound: hold %s, want 1s", held, got)
	}
	for i := range held - 6000 {
		b.done(backlogKey(i))
	}
	if got := b.hold(base, last, late, true); got != busyLook*base {
		t.Errorf("6000 held: hold %s, want %s", got, busyLook*base)
	}
}

func TestPodWaitsItsTurn(t *testing.T) {
	now := time.Unix(1000, 0)
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	for _, c := range []struct {
		name string
		pod  corev1.PodStatus
		gone *metav1.Time
		want bool
	}{
		{name: "not scheduled yet", want: true},
		{name: "scheduling", pod: corev1.PodStatus{Phase: corev1.PodPending}, want: true},
		{name: "unschedulable", pod: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}},
		{name: "gated", pod: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}}},
		{name: "scheduled, creating", pod: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{State: waiting("ContainerCreating")}},
		}, want: true},
		{name: "init containers first", pod: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{State: waiting("PodInitializing")}},
		}, want: true},
		{name: "image pull backing off", pod: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{State: waiting("ImagePullBackOff")}}}},
		{name: "init container crashing", pod: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{State: waiting("CrashLoopBackOff"), RestartCount: 3}}}},
		{name: "running, restarted", pod: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 1}}}},
		{name: "terminating, within its grace", gone: &metav1.Time{Time: now.Add(time.Second)}, want: true},
		{name: "terminating past its deadline", gone: &metav1.Time{Time: now.Add(-time.Second)}},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: c.gone}, Status: c.pod}
		if got := podWaitsItsTurn(pod, now); got != c.want {
			t.Errorf("%s: waits its turn %v, want %v", c.name, got, c.want)
		}
	}
	if !podWaitsItsTurn(nil, now) {
		t.Errorf("a Pod not in the cache yet does not wait its turn")
	}
}

// TestStatusBacklogStall: a burst that makes no progress for busyStall
// windows is reported as a quiet controller would,
// counted from the burst's start or its last progress.
func TestStatusBacklogStall(t *testing.T) {
	base, start := 5*time.Second, time.Unix(1000, 0)
	var b statusBacklog
	b.progress(start.Add(-time.Hour)) // progress long before the burst
	for i := range busyBacklog + 1 {
		b.wait(backlogKey(i), "", base, start)
	}
	last := start
	if got := b.hold(base, last, start.Add(busyStall*base-time.Second), false); got != busyLook*base {
		t.Errorf("a burst that began %s ago: hold %s, want %s", busyStall*base-time.Second, got, busyLook*base)
	}
	stall := start.Add(busyStall * base)
	if got := b.hold(base, last, stall, false); got != 0 {
		t.Errorf("a burst stalled since its start: hold %s, want 0 (written)", got)
	}
	if got := b.hold(base, stall.Add(-time.Second), stall, false); got != base-time.Second {
		t.Errorf("stalled, written a second ago: hold %s, want %s", got, base-time.Second)
	}
	// One Sandbox reaches rest: the burst moves again, and holds again.
	b.progress(stall)
	if got := b.hold(base, last, stall.Add(time.Second), false); got != busyLook*base {
		t.Errorf("moving again: hold %s, want %s", got, busyLook*base)
	}
	if got := b.hold(base, last, stall.Add(busyStall*base), false); got != 0 {
		t.Errorf("stalled again: hold %s, want 0", got)
	}
	// A new burst long after the last restarts the clock.
	later := stall.Add(time.Hour)
	var fresh statusBacklog
	fresh.progress(start)
	fresh.busyAt.Store(start.UnixNano())
	for i := range busyBacklog + 1 {
		fresh.wait(backlogKey(i), "", base, later)
	}
	if got := fresh.hold(base, later, later.Add(time.Second), false); got != busyLook*base {
		t.Errorf("a new burst: hold %s, want %s", got, busyLook*base)
	}
}

// TestStatusBacklogPodsMoving: a burst whose Pods move (scheduled,
// started, terminating) without any Sandbox reaching rest yet is not
// stalled; one whose held Pods stay where they are is.
func TestStatusBacklogPodsMoving(t *testing.T) {
	base, start := 5*time.Second, time.Unix(1000, 0)
	var b statusBacklog
	for i := range busyBacklog + 1 {
		b.wait(backlogKey(i), "1", base, start)
	}
	nearly := start.Add(busyStall*base - time.Second)
	b.wait(backlogKey(0), "1", base, nearly) // held again, its Pod as it was
	if got := b.hold(base, start, start.Add(busyStall*base), false); got != 0 {
		t.Errorf("held Pods that stay put: hold %s, want 0 (stalled)", got)
	}
	b.wait(backlogKey(1), "2", base, nearly) // its Pod was scheduled meanwhile
	if got := b.hold(base, start, start.Add(busyStall*base), false); got != busyLook*base {
		t.Errorf("a held Pod moved: hold %s, want %s", got, busyLook*base)
	}
	if n := b.n.Load(); n != busyBacklog+1 {
		t.Errorf("backlog %d, want %d: a Sandbox held again counts once", n, busyBacklog+1)
	}
	// The controller creating or deleting children is progress too.
	r := &SandboxReconciler{StatusCoalesceWindow: base}
	r.backlog.wait(backlogKey(0), "", base, start)
	for i := range busyBacklog + 1 {
		r.backlog.wait(backlogKey(i), "", base, start)
	}
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "u2"}}
	r.changedChildren(sb, nearly)
	if got := r.backlog.hold(base, start, start.Add(busyStall*base), false); got != busyLook*base {
		t.Errorf("children created in the burst: hold %s, want %s", got, busyLook*base)
	}
}

func TestDeferStatus(t *testing.T) {
	base, now := 5*time.Second, time.Unix(1000, 0)
	sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb", UID: "u1", Generation: 2}}
	sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	terminating := render.SandboxStatus(render.SandboxStatusInputs{Sandbox: sb, Pod: pod, Pods: 1, Now: metav1.NewTime(now)})
	troubled := pod.DeepCopy() // terminating past its deadline
	troubled.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)}
	suspended := render.SandboxStatus(render.SandboxStatusInputs{Sandbox: sb, Now: metav1.NewTime(now)})

	r := &SandboxReconciler{StatusCoalesceWindow: base}
	r.changedChildren(sb, now) // the Pod deleted
	if got := r.deferStatus(sb, suspended, nil, now); got != 0 {
		t.Errorf("a resting status is held %s", got)
	}
	if got := r.deferStatus(sb, terminating, troubled, now.Add(time.Second)); got != base-time.Second {
		t.Errorf("a transitional status is held %s, want %s", got, base-time.Second)
	}
	for i := range busyBacklog + 1 {
		r.backlog.wait(backlogKey(i), "", base, now)
	}
	if got := r.deferStatus(sb, terminating, troubled, now.Add(base)); got != busyLook*base {
		t.Errorf("in a burst a transitional status is held %s, want %s", got, busyLook*base)
	}
	// Past the bound, one whose Pod is stuck is written; one whose Pod
	// waits its turn is held on.
	late := now.Add(busyHold * base)
	r.backlog.progress(late)
	if got := r.deferStatus(sb, terminating, troubled, late); got != 0 {
		t.Errorf("a Pod stuck terminating, %s into a burst: held %s", busyHold*base, got)
	}
	if got := r.deferStatus(sb, terminating, pod, late); got != busyLook*base {
		t.Errorf("a Pod terminating in its turn, %s into a burst: held %s, want %s", busyHold*base, got, busyLook*base)
	}
	// What we wrote last is not held (nothing is sent), and does not
	// count as waiting.
	r.memory.status.Remember(client.ObjectKeyFromObject(sb), sb.UID, statusRecord[*sandboxv1beta1.SandboxStatus]{
		intent: ssa.IntentOf(terminating), at: now,
	})
	r.backlog.done(client.ObjectKeyFromObject(sb))
	if got := r.deferStatus(sb, terminating, troubled, now.Add(base)); got != 0 {
		t.Errorf("the status written last is held %s", got)
	}
	if n := r.backlog.n.Load(); n != busyBacklog+1 {
		t.Errorf("backlog %d, want %d", n, busyBacklog+1)
	}
}

// TestStatusBacklogStream: a stream of Pods created or deleted by the
// controller, more than busyBacklog within two windows, is a burst though
// few Sandboxes wait at once; it is over busyFactor windows after the
// stream thinned out.
func TestStatusBacklogStream(t *testing.T) {
	base, start := 5*time.Second, time.Unix(1000, 0)
	var b statusBacklog
	at := start
	for i := range busyBacklog {
		at = start.Add(time.Duration(i) * 2 * base / busyBacklog) // spread over two windows
		b.changed(base, at)
	}
	if b.busy(base, at) {
		t.Fatalf("busy after %d changes", busyBacklog)
	}
	b.changed(base, at)
	if !b.busy(base, at) {
		t.Fatalf("not busy after %d changes within two windows", busyBacklog+1)
	}
	if got := b.hold(base, at, at.Add(time.Second), false); got != busyLook*base {
		t.Errorf("in the stream a transitional status is held %s, want %s", got, busyLook*base)
	}
	// Two windows later the stream is gone from the counts, and busyFactor
	// windows after it was last seen the burst is over.
	later := at.Add(2 * base)
	if b.streaming(base, later) {
		t.Errorf("still streaming two windows after the last change")
	}
	if b.busy(base, at.Add((busyFactor+2)*base)) {
		t.Errorf("busy long after the stream")
	}
	// A slow trickle never counts.
	var slow statusBacklog
	for i := range 10 * busyBacklog {
		now := start.Add(time.Duration(i) * base / 20)
		slow.changed(base, now)
		if slow.busy(base, now) {
			t.Fatalf("busy at %d changes, 20 a window", i+1)
		}
	}
}
