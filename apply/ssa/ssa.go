package ssa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Action is what applying an object did.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
)

// Change is the outcome for one object.
type Change struct {
	Kind      string
	Namespace string
	Name      string
	Action    Action
	// Pending is set on an Unchanged change when the object was created by
	// us moments ago and the cache has not shown it yet: nothing was sent,
	// and the caller should look again shortly (see CreateExpectation).
	Pending bool
}

func (c Change) String() string {
	return fmt.Sprintf("%s/%s/%s: %s", c.Kind, c.Namespace, c.Name, c.Action)
}

// ChangeSet is the outcome of one reconcile.
type ChangeSet []Change

// String lists the changes one per line, sorted by kind, namespace and name,
// so equal sets print equally whatever the order of work.
func (s ChangeSet) String() string {
	lines := make([]string, len(s))
	for i, c := range s {
		lines[i] = c.String()
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Pending reports whether an object we created is not in the cache yet.
func (s ChangeSet) Pending() bool {
	for _, c := range s {
		if c.Pending {
			return true
		}
	}
	return false
}

// Changed reports whether any object was created, configured or deleted.
func (s ChangeSet) Changed() bool {
	for _, c := range s {
		if c.Action != Unchanged {
			return true
		}
	}
	return false
}

// Engine applies objects with server-side apply.
type Engine struct {
	client        client.Client
	fieldManager  string
	statusManager string

	// Counters, for metrics and tests.
	applies, skipped, deletes, noops atomic.Int64

	// written remembers, per object, our last write (see write).
	written sync.Map // string -> write

	observer func(Change)

	// verified remembers, per object, the last time extraction showed that
	// what we own equals what we want (see verifiedEqual).
	verified sync.Map // string -> verification
}

// verification records that, for the object with uid, while our field
// manager's managedFields entry read managed, what we own equalled the
// desired configuration with this fingerprint.
type verification struct {
	uid     types.UID
	managed string
	desired string
}

// Observe sets a function told every outcome (metrics). Call it before use.
func (e *Engine) Observe(f func(Change)) { e.observer = f }

func (e *Engine) observe(c Change) {
	if e.observer != nil {
		e.observer(c)
	}
}

// observeOK observes a change that happened: a refused request changed
// nothing and is not counted as created or configured.
func (e *Engine) observeOK(c Change, err error) {
	if err == nil {
		e.observe(c)
	}
}

// CreateExpectation is how long an object we created is expected to show up
// in the cache. Within it, a reconcile that does not see the object yet does
// not create it again; after it, it does.
const CreateExpectation = 5 * time.Second

// write is what the engine last wrote for one object.
type write struct {
	rv      string // resourceVersion the server returned
	at      time.Time
	desired any // the apply configuration sent (with the server's response)
	created bool
}

// New returns an Engine writing through c (writes always reach the API
// server; reads of live objects are the caller's, normally from a cache).
func New(c client.Client, fieldManager, statusManager string) *Engine {
	return &Engine{client: c, fieldManager: fieldManager, statusManager: statusManager}
}

// FieldManager is the field manager of objects.
func (e *Engine) FieldManager() string { return e.fieldManager }

// StatusManager is the field manager of status.
func (e *Engine) StatusManager() string { return e.statusManager }

// Stats are the engine's counters since it was created.
type Stats struct {
	// Applies is the number of apply requests sent.
	Applies int64
	// Skipped is the number of applies not sent because the live object
	// already held exactly what we would apply.
	Skipped int64
	// Deletes is the number of delete requests sent.
	Deletes int64
	// NoOps is the number of applies the server found to change nothing:
	// sent because the cached object was older than the server's.
	NoOps int64
}

// Saved counts a write a caller did not send because it knew the server
// already had it (for the same counter as the engine's own diff).
func (e *Engine) Saved(kind, namespace, name string) {
	e.skipped.Add(1)
	e.observe(Change{Kind: kind, Namespace: namespace, Name: name, Action: Unchanged})
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Applies: e.applies.Load(), Skipped: e.skipped.Load(), Deletes: e.deletes.Load(), NoOps: e.noops.Load()}
}

// ApplyConfiguration is a generated root apply configuration.
type ApplyConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
}

// Options change one apply.
type Options struct {
	// Force takes ownership of fields another manager holds. Only for
	// adoption, where the user asked us to take an object over.
	Force bool
}

// Apply applies desired unless what our field manager owns of live already
// equals it. live is the object as the cache holds it, or nil when it does not
// exist; extract is the generated Extract function of its kind (ExtractPod,
// ExtractSandbox, ...).
func Apply[O client.Object, AC ApplyConfiguration](ctx context.Context, e *Engine, kind string, desired AC, live O,
	extract func(O, string) (AC, error), opts Options) (change Change, err error) {
	change = Change{Kind: kind, Namespace: deref(desired.GetNamespace()), Name: deref(desired.GetName()), Action: Created}
	defer func() { e.observeOK(change, err) }()
	if isNil(live) && e.recentlyCreated(change, desired) {
		e.skipped.Add(1)
		change.Action, change.Pending = Unchanged, true
		return change, nil
	}
	if !isNil(live) {
		same, err := e.ownsDesired(change, live, "", desired, func() (any, error) { return extract(live, e.fieldManager) })
		if err != nil {
			return change, fmt.Errorf("extracting the fields %s owns of %s: %w", e.fieldManager, kind, err)
		}
		if same {
			e.skipped.Add(1)
			change.Action = Unchanged
			return change, nil
		}
		change.Action = Configured
	}
	applyOpts := []client.ApplyOption{client.FieldOwner(e.fieldManager)}
	if opts.Force {
		applyOpts = append(applyOpts, client.ForceOwnership)
	}
	e.applies.Add(1)
	sent := Fingerprint(desired)
	if err := e.client.Apply(ctx, desired, applyOpts...); err != nil {
		return change, wrapConflict(kind, change, err)
	}
	e.noteWrite(change, desired, sent)
	return change, nil
}

// ownsDesired reports whether what our field manager owns of live equals
// desired. Extraction (a structured-merge-diff conversion of the whole
// object) is the expensive part of a reconcile that changes nothing, so its
// positive result is remembered: the values of fields we own cannot change
// without our managedFields entry changing (another writer that sets them
// takes or shares ownership), so while that entry and desired stay the same
// the answer stays yes.
func (e *Engine) ownsDesired(c Change, live client.Object, subresource string, desired any, extract func() (any, error)) (bool, error) {
	manager := e.fieldManager
	if subresource != "" {
		manager = e.statusManager
	}
	k := key(c)
	managed := managedEntry(live, manager, subresource)
	fp := digest(Fingerprint(desired))
	if v, ok := e.verified.Load(k); ok {
		if v := v.(verification); managed != "" && v.uid == live.GetUID() && v.managed == managed && v.desired == fp {
			return true, nil
		}
	}
	owned, err := extract()
	if err != nil {
		return false, err
	}
	if !apiequality.Semantic.DeepEqual(owned, desired) {
		e.verified.Delete(k)
		return false, nil
	}
	if managed != "" {
		e.verified.Store(k, verification{uid: live.GetUID(), managed: managed, desired: fp})
	}
	return true, nil
}

// managedEntry identifies our field manager's Apply entry on an object: its
// time and owned field set. Empty when there is none.
func managedEntry(o client.Object, manager, subresource string) string {
	for _, m := range o.GetManagedFields() {
		if m.Manager == manager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == subresource {
			t := ""
			if m.Time != nil {
				t = m.Time.UTC().String()
			}
			raw := ""
			if m.FieldsV1 != nil {
				raw = m.FieldsV1.GetRawString()
			}
			return digest(m.APIVersion + "|" + t + "|" + raw)
		}
	}
	return ""
}

// digest keeps remembered values small.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return string(sum[:16])
}

// Fingerprint is the JSON of an apply configuration; take it before sending,
// as the client writes the server's response into the configuration.
func Fingerprint(ac any) string {
	b, _ := json.Marshal(ac)
	return string(b)
}

// noteWrite records a write, counting it as a no-op when the server returned
// the resourceVersion of our previous write.
func (e *Engine) noteWrite(c Change, response any, sent string) {
	w := write{rv: resourceVersion(response), at: time.Now(), desired: sent, created: c.Action == Created}
	if prev, ok := e.written.Swap(key(c), w); ok && prev.(write).rv == w.rv {
		e.noops.Add(1)
	}
	if e.applies.Load()%1024 == 0 {
		e.sweep(w.at.Add(-time.Minute))
	}
}

// sweep forgets writes older than before, so memory stays bounded by the
// objects written in the last minute.
func (e *Engine) sweep(before time.Time) {
	e.written.Range(func(k, v any) bool {
		if v.(write).at.Before(before) {
			e.written.Delete(k)
		}
		return true
	})
}

// recentlyCreated reports that we created this object, as desired now,
// within CreateExpectation.
func (e *Engine) recentlyCreated(c Change, desired any) bool {
	v, ok := e.written.Load(key(c))
	if !ok {
		return false
	}
	w := v.(write)
	return w.created && time.Since(w.at) < CreateExpectation && w.desired == Fingerprint(desired)
}

// Forget drops what the engine remembers about an object (it was deleted).
func (e *Engine) Forget(kind, namespace, name string) {
	k := key(Change{Kind: kind, Namespace: namespace, Name: name})
	e.written.Delete(k)
	e.verified.Delete(k)
}

func key(c Change) string { return c.Kind + "/" + c.Namespace + "/" + c.Name }

// resourceVersion reads the resourceVersion the server returned into an
// apply configuration (only on the write path, after a request).
func resourceVersion(ac any) string {
	b, err := json.Marshal(ac)
	if err != nil {
		return ""
	}
	var meta struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if json.Unmarshal(b, &meta) != nil {
		return ""
	}
	return meta.Metadata.ResourceVersion
}

// ApplyStatus applies desired (an apply configuration holding only status) to
// the status subresource unless what the status manager owns already equals
// it. Status has a single writer, so ownership is forced.
func ApplyStatus[O client.Object, AC ApplyConfiguration](ctx context.Context, e *Engine, kind string, desired AC, live O,
	extractStatus func(O, string) (AC, error)) (change Change, err error) {
	change = Change{Kind: kind + "Status", Namespace: deref(desired.GetNamespace()), Name: deref(desired.GetName()), Action: Configured}
	defer func() { e.observeOK(change, err) }()
	same, err := e.ownsDesired(change, live, "status", desired, func() (any, error) { return extractStatus(live, e.statusManager) })
	if err != nil {
		return change, fmt.Errorf("extracting the status fields %s owns of %s: %w", e.statusManager, kind, err)
	}
	if same {
		e.skipped.Add(1)
		change.Action = Unchanged
		return change, nil
	}
	e.applies.Add(1)
	sent := Fingerprint(desired)
	if err := e.client.Status().Apply(ctx, desired, client.FieldOwner(e.statusManager), client.ForceOwnership); err != nil {
		return change, fmt.Errorf("applying %s status: %w", kind, err)
	}
	e.noteWrite(change, desired, sent)
	return change, nil
}

// Delete deletes obj, guarded by its UID so that a newer object of the same
// name is never deleted by mistake. An object that is already gone or being
// deleted is unchanged.
func (e *Engine) Delete(ctx context.Context, kind string, obj client.Object, opts ...client.DeleteOption) (change Change, err error) {
	change = Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Deleted}
	defer func() { e.observeOK(change, err) }()
	if obj.GetDeletionTimestamp() != nil {
		change.Action = Unchanged
		return change, nil
	}
	uid := obj.GetUID()
	pre := client.Preconditions{UID: &uid}
	for _, o := range opts {
		if p, ok := o.(client.Preconditions); ok && p.ResourceVersion != nil {
			pre.ResourceVersion = p.ResourceVersion
		}
	}
	opts = append(opts, pre)
	e.deletes.Add(1)
	e.Forget(kind, obj.GetNamespace(), obj.GetName())
	if err := e.client.Delete(ctx, obj, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			change.Action = Unchanged
			return change, nil
		}
		return change, fmt.Errorf("deleting %s: %w", kind, err)
	}
	return change, nil
}

// DeleteIfUnchanged deletes obj only if it is still exactly the object the
// caller decided on: guarded by its UID and its resourceVersion. Any change
// since (another controller adopted it, a claim took it, its status moved
// on) fails the delete with a Conflict, and the caller decides again from a
// fresh view. Deletes of objects that hold or guard user data go this way.
func (e *Engine) DeleteIfUnchanged(ctx context.Context, kind string, obj client.Object, opts ...client.DeleteOption) (Change, error) {
	if obj.GetResourceVersion() == "" {
		return Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()},
			fmt.Errorf("deleting %s %s: no resourceVersion to guard the delete with", kind, obj.GetName())
	}
	rv := obj.GetResourceVersion()
	return e.Delete(ctx, kind, obj, append(opts, client.Preconditions{ResourceVersion: &rv})...)
}

// ConflictError reports fields that another field manager owns and that we
// would change. The controller does not fight over them: it reports the
// conflict and waits for a change to the object or its inputs.
type ConflictError struct {
	Change Change
	// Fields are the API server's descriptions of the conflicting fields.
	Fields []string
	Err    error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s %s/%s: fields owned by another field manager conflict with ours: %s",
		e.Change.Kind, e.Change.Namespace, e.Change.Name, strings.Join(e.Fields, "; "))
}

func (e *ConflictError) Unwrap() error { return e.Err }

// IsConflict reports whether err is (or wraps) a ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}

func wrapConflict(kind string, change Change, err error) error {
	if !apierrors.IsConflict(err) {
		return fmt.Errorf("applying %s: %w", kind, err)
	}
	var fields []string
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == metav1.CauseTypeFieldManagerConflict {
				fields = append(fields, c.Message)
			}
		}
	}
	if len(fields) == 0 {
		// A plain optimistic-concurrency conflict, not an ownership one.
		return fmt.Errorf("applying %s: %w", kind, err)
	}
	return &ConflictError{Change: change, Fields: fields, Err: err}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func isNil(o any) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Create creates obj, which must not exist yet: the way to make an object
// whose name is derived deterministically, so that a caller acting on a
// stale view can never end up with two. An object that already exists is
// reported as Unchanged with exists set; nothing is overwritten. The object
// is owned by the engine's field manager.
func (e *Engine) Create(ctx context.Context, kind string, obj client.Object) (change Change, exists bool, err error) {
	change = Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Created}
	e.applies.Add(1)
	if err := e.client.Create(ctx, obj, client.FieldOwner(e.fieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// A request was spent, so this is not a saving: not observed.
			change.Action = Unchanged
			return change, true, nil
		}
		return change, false, fmt.Errorf("creating %s: %w", kind, err)
	}
	e.observe(change)
	return change, false, nil
}

// Patch sends a patch to obj under the given field manager and reads the
// result back into obj. It is for changes server-side apply cannot express
// safely, such as moving ownership of an object between owners under a
// resourceVersion precondition carried in the patch; a failed precondition
// comes back as a Conflict error (apierrors.IsConflict).
func (e *Engine) Patch(ctx context.Context, kind string, obj client.Object, patch client.Patch, fieldManager string) (Change, error) {
	change := Change{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Configured}
	e.applies.Add(1)
	e.Forget(kind, obj.GetNamespace(), obj.GetName())
	if err := e.client.Patch(ctx, obj, patch, client.FieldOwner(fieldManager)); err != nil {
		return change, err
	}
	e.observe(change)
	return change, nil
}
