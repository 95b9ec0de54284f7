package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Plan is everything one reconcile of an object will do to the cluster, as
// a value: the objects the policies judge first, then the steps in the
// order they run. A reconciler executes the steps one by one (a run of
// create steps, independent of each other, may go concurrently) and stops
// at the first that fails; whether a step sends a request at all is the apply
// engine's diff (an apply of what is already there, or a delete of an
// object already going, sends nothing). A plan marshals to YAML with stable
// output, so golden files show what a change does to the cluster.
type Plan struct {
	// Checks are the objects the policies judge before any step runs: the
	// object itself and the children the plan would create or adopt, all of
	// them even when a Problem stops the plan before it reaches some.
	Checks []Check `json:"checks,omitempty"`
	// Steps run in order.
	Steps []Step `json:"steps"`
	// Problem, when not empty, is a terminal problem only a user can fix
	// (an object in the way, a spec that cannot be rendered): the plan
	// holds none of the steps it rules out (a Sandbox's stop where it was
	// met; a pool creates no member), and it is reported (by the status
	// step; a kind without status logs it).
	Problem string `json:"problem,omitempty"`
	// RecheckAt is when to look again even if nothing changes (the
	// shutdown time); nil when no time is due.
	RecheckAt *metav1.Time `json:"recheckAt,omitempty"`
}

// Action is what a step does.
type Action string

// The actions of plan steps.
const (
	// ActionApply server-side applies Object with our field manager,
	// taking no field another manager owns.
	ActionApply Action = "apply"
	// ActionApplyForce applies Object taking ownership of fields another
	// manager holds: only to adopt an object the user let us take over.
	ActionApplyForce Action = "apply-force"
	// ActionCreate creates Object, which must not exist; an existing
	// object is never overwritten.
	ActionCreate Action = "create"
	// ActionDelete deletes the object under Preconditions.
	ActionDelete Action = "delete"
	// ActionAdopt hands a warm member to a claim: Object is the Sandbox
	// apply configuration (render.Adoption) applied with our field
	// manager, forced, carrying the member's resourceVersion, so two
	// claims can never both take it.
	ActionAdopt Action = "adopt"
	// ActionAnnotate applies Object, an apply configuration holding only
	// the object's name, UID (so a namesake is never created or touched)
	// and the annotations the controller records on it, under the
	// engine's annotation manager, forced; Remove lists annotations it
	// takes off (left out of Object; released by our other managers too).
	ActionAnnotate Action = "annotate"
	// ActionStatus applies Object, an apply configuration holding only
	// status, to the status subresource.
	ActionStatus Action = "status"
	// ActionEvent records Event about the reconciled object.
	ActionEvent Action = "event"
)

// Step is one thing a plan does.
type Step struct {
	Action Action `json:"action"`
	// Kind, Namespace and Name name the object the step acts on (for an
	// event, the object the event is about).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Reason says in a few words why the step is there.
	Reason string `json:"reason"`
	// Object is the apply configuration of apply, apply-force, adopt,
	// annotate and status steps, the object of a create step.
	Object any `json:"object,omitempty"`
	// Preconditions guard a delete: it fails rather than delete an object
	// that is not the one decided on.
	Preconditions *Preconditions `json:"preconditions,omitempty"`
	// Propagation is a delete's propagation policy; nil: the default.
	Propagation *metav1.DeletionPropagation `json:"propagation,omitempty"`
	// Remove are the annotations an annotate step takes off.
	Remove []string `json:"remove,omitempty"`
	// Event is an event step's event.
	Event *Event `json:"event,omitempty"`
	// Immediate marks a status step that is written at once, whatever the
	// steps before it changed. Otherwise status is written only when no
	// step changed anything (the watch event of a change brings a fresh
	// plan), and the reconciler may defer it to coalesce writes.
	Immediate bool `json:"immediate,omitempty"`
	// Live is the object as observed that the step acts on: what an apply
	// is compared with (nil when it does not exist), what a delete or an
	// annotate patch targets. It is not part of the golden output.
	Live runtime.Object `json:"-"`
}

// Preconditions of a delete.
type Preconditions struct {
	UID             types.UID `json:"uid,omitempty"`
	ResourceVersion string    `json:"resourceVersion,omitempty"`
}

// Event is an event a plan records.
type Event struct {
	// Type is Normal or Warning.
	Type   string `json:"type"`
	Reason string `json:"reason"`
	// Action is the event's action (what was being done).
	Action  string `json:"action"`
	Message string `json:"message"`
	// Related names a second object the event concerns (Kind/name).
	Related string `json:"related,omitempty"`
	// Once marks an event the reconciler records only when its message
	// differs from the one it last recorded with this reason for the
	// object; a plan that reaches its (non-immediate) status step without
	// it makes the reconciler forget that message.
	Once bool `json:"once,omitempty"`
	// RelatedObject is the object Related names; not in the golden output.
	RelatedObject runtime.Object `json:"-"`
}

// Check is an object the policies judge before a plan runs.
type Check struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Reason says why it is judged: the object itself, a new child, a
	// child about to be adopted.
	Reason string `json:"reason"`
	// Adopt marks an existing object about to be taken over, judged as
	// adoption will leave it.
	Adopt bool `json:"adopt,omitempty"`
	// Object is what the policies see; not in the golden output (it is the
	// reconciled object, or a step's object).
	Object any `json:"-"`
}

// checkedKinds are the group/version/kinds of what plans have judged.
var checkedKinds = map[string]schema.GroupVersionKind{
	"Sandbox":               sandboxv1beta1.GroupVersion.WithKind("Sandbox"),
	"Pod":                   corev1.SchemeGroupVersion.WithKind("Pod"),
	"Service":               corev1.SchemeGroupVersion.WithKind("Service"),
	"PersistentVolumeClaim": corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	"NetworkPolicy":         networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
}

// GVK returns the group, version and kind of the judged object; ok is
// false for a kind no plan judges.
func (c Check) GVK() (gvk schema.GroupVersionKind, ok bool) {
	gvk, ok = checkedKinds[c.Kind]
	return gvk, ok
}
