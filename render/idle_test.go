package render

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func TestIdleDeadline(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	readyAt := created.Add(10 * time.Second)
	at := func(d time.Duration) time.Time { return created.Add(d) }
	sandbox := func(annotations map[string]string, mutate ...func(*sandboxv1beta1.Sandbox)) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: "ns",
			CreationTimestamp: metav1.NewTime(created), Annotations: annotations}}
		sb.Status.Conditions = []metav1.Condition{{Type: sandboxv1beta1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: sandboxv1beta1.ReasonDependenciesReady, LastTransitionTime: metav1.NewTime(readyAt)}}
		for _, m := range mutate {
			m(sb)
		}
		return sb
	}
	idle := func(v string) map[string]string { return map[string]string{sandboxv1beta1.AnnotationIdleTimeout: v} }
	withActivity := func(v string) map[string]string {
		return map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m", sandboxv1beta1.AnnotationLastActivity: v}
	}
	notReady := func(sb *sandboxv1beta1.Sandbox) { sb.Status.Conditions[0].Status = metav1.ConditionFalse }
	resumedBy := func(manager string, when time.Time) func(*sandboxv1beta1.Sandbox) {
		return func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeRunning
			sb.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
				Time: ptr.To(metav1.NewTime(when)), FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:operatingMode":{}}}`)}}
		}
	}
	for name, tc := range map[string]struct {
		sb      *sandboxv1beta1.Sandbox
		now     time.Time
		want    IdleDecision
		wantErr string
	}{
		"no annotation":          {sb: sandbox(nil), now: at(time.Hour)},
		"resume on connect only": {sb: sandbox(map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}), now: at(time.Hour)},
		"idle timeout off":       {sb: sandbox(idle("0")), now: at(time.Hour)},
		"not yet idle": {sb: sandbox(idle("1m")), now: at(30 * time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, After: 40 * time.Second}},
		"idle exactly at the deadline": {sb: sandbox(idle("1m")), now: readyAt.Add(time.Minute),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"idle long past": {sb: sandbox(idle("1m")), now: at(time.Hour),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"recent activity": {sb: sandbox(withActivity("2026-01-01T12:10:00Z")), now: at(10*time.Minute + 30*time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: at(10 * time.Minute), After: 30 * time.Second}},
		"activity long ago": {sb: sandbox(withActivity("2026-01-01T12:10:00Z")), now: at(11 * time.Minute),
			want: IdleDecision{Timeout: time.Minute, Since: at(10 * time.Minute), Suspend: true}},
		"activity before ready counts from ready": {sb: sandbox(withActivity("2026-01-01T11:00:00Z")), now: at(20 * time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, After: 50 * time.Second}},
		"unparsable activity is ignored": {sb: sandbox(withActivity("yesterday")), now: at(20 * time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, After: 50 * time.Second}},
		"ready condition older than creation": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Status.Conditions[0].LastTransitionTime = metav1.NewTime(created.Add(-time.Hour))
		}), now: at(30 * time.Second), want: IdleDecision{Timeout: time.Minute, Since: created, After: 30 * time.Second}},
		"not ready":     {sb: sandbox(idle("1m"), notReady), now: at(time.Hour)},
		"no conditions": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) { sb.Status.Conditions = nil }), now: at(time.Hour)},
		"already suspended": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
		}), now: at(time.Hour)},
		"explicitly running": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeRunning
		}), now: at(time.Hour), want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		// Resumed (generation 3) before the controller reported the
		// suspend (generation 2): the Ready condition of generation 1 is
		// stale, and idle since long ago by its old transition time.
		"resumed before the status caught up": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Generation = 3
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeRunning
			sb.Status.Conditions[0].ObservedGeneration = 1
		}), now: at(time.Hour)},
		// Resumed through the router at 12:30 (its managedFields entry),
		// while Ready still shows the transition of 12:00:10: idle from the
		// resume (rounded up to the next second), not from then.
		"resumed through the router": {sb: sandbox(idle("1m"), resumedBy(sandboxv1beta1.FieldManagerOperatingMode, at(30*time.Minute))),
			now:  at(30*time.Minute + 30*time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: at(30*time.Minute + time.Second), After: 31 * time.Second}},
		"resumed by another manager": {sb: sandbox(idle("1m"), resumedBy("kubectl-patch", at(30*time.Minute))),
			now:  at(30*time.Minute + 30*time.Second),
			want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"ready condition that names no generation": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Generation = 3
		}), now: at(time.Hour), want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"ready for the current generation": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Generation = 3
			sb.Status.Conditions[0].ObservedGeneration = 3
		}), now: at(time.Hour), want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"being deleted": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.DeletionTimestamp = ptr.To(metav1.NewTime(at(time.Minute)))
		}), now: at(time.Hour)},
		"unclaimed warm member by label": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abc"}
		}), now: at(time.Hour)},
		"unclaimed warm member by owner": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxWarmPool",
				Name: "pool", UID: "p", Controller: ptr.To(true)}}
		}), now: at(time.Hour)},
		"claimed member": {sb: sandbox(idle("1m"), func(sb *sandboxv1beta1.Sandbox) {
			sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
				Name: "claim", UID: "c", Controller: ptr.To(true)}}
		}), now: at(time.Hour), want: IdleDecision{Timeout: time.Minute, Since: readyAt, Suspend: true}},
		"invalid idle timeout":   {sb: sandbox(idle("soon")), now: at(time.Hour), wantErr: "is not a duration"},
		"idle timeout too short": {sb: sandbox(idle("10ms")), now: at(time.Hour), wantErr: "shorter than"},
		"invalid resume on connect": {sb: sandbox(map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m",
			sandboxv1beta1.AnnotationResumeOnConnect: "yes please"}), now: at(time.Hour), wantErr: "is not a boolean"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := IdleDeadline(tc.sb, tc.now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got.Suspend {
					t.Error("an invalid annotation suspends")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A warm pool never gives its members the resume annotations of its
// template: an unclaimed member must never be suspended for being idle.
func TestWarmMembersCarryNoResumeAnnotations(t *testing.T) {
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tpl", UID: "t",
		Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "1m", sandboxv1beta1.AnnotationResumeOnConnect: "true"}}}
	tmpl.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "p"}}
	member, err := WarmPoolMember(WarmPoolInputs{Pool: pool, Template: tmpl}, "pool-x")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{sandboxv1beta1.AnnotationIdleTimeout, sandboxv1beta1.AnnotationResumeOnConnect} {
		if _, ok := member.Annotations[k]; ok {
			t.Errorf("warm member carries %s", k)
		}
	}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "c",
		Annotations: map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "5m"}}}
	cold, err := ClaimSandbox(ClaimInputs{Claim: claim, Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "5m", sandboxv1beta1.AnnotationResumeOnConnect: "true"}
	for k, v := range want {
		if cold.Annotations[k] != v {
			t.Errorf("cold Sandbox: %s = %q, want %q", k, cold.Annotations[k], v)
		}
	}
}
