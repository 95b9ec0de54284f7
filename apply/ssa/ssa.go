package ssa

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Engine applies objects with server-side apply.
type Engine struct {
	client        client.Client
	reader        client.Reader
	fieldManager  string
	statusManager string

	// Counters, for metrics and tests.
	applies, skipped, deletes, noops atomic.Int64

	// written remembers, per object, our last write: its resourceVersion,
	// whether it created the object, what was sent. Swept: it only matters
	// for moments (CreateExpectation, counting no-ops).
	written Memo[writeKey, Write]

	observer func(Change)

	// owned remembers, per object, that extraction showed what we own
	// equal to what we want, under which managedFields entry of ours (see
	// ownsDesired). Forgotten with the object.
	owned Memo[writeKey, ownedAs]

	// extracted remembers, per object and manager, the last extraction of
	// what the manager owns (see Extract). Forgotten with the object.
	extracted   Memo[writeKey, extraction]
	extractions struct{ hits, misses atomic.Int64 }

	// creates lets one write at a time create an object that is not
	// cached yet (the others then find it recently created).
	creates creating

	// deleted remembers, per object (by its UID), when a delete of ours
	// was accepted: within CreateExpectation after it, a reconcile that
	// still sees the object as it was (the cache has not shown its
	// deletionTimestamp or its removal yet) sends no second delete.
	// Swept: entries older than a minute go.
	deleted Memo[writeKey, time.Time]

	// postCreates is set once the API server refused a create by apply:
	// Create then creates and upgrades the ownership in two requests.
	postCreates atomic.Bool

	// attempts remembers, per object and manager, the writes sent (when,
	// how many on their way, the resourceVersion they gave it): until the
	// cache shows them a recent managedFields entry of ours is ambiguous
	// (settled.go). Swept: entries older than a minute go.
	attempts Memo[writeKey, attempt]
	// firstUse is when the engine first judged an entry (Unix
	// nanoseconds; 0 before).
	firstUse atomic.Int64
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

// New returns an Engine writing through c (writes always reach the API
// server; reads of live objects are the caller's, normally from a cache).
func New(c client.Client, fieldManager, statusManager string) *Engine {
	return &Engine{client: c, reader: c, fieldManager: fieldManager, statusManager: statusManager}
}

// ReadWith sets the reader the engine reads an object with when a write of
// its own lost a race (the ownership upgrade after a create): one that
// reads past the cache. Without it, the engine reads through its client.
func (e *Engine) ReadWith(r client.Reader) { e.reader = r }

// FieldManager is the field manager of objects.
func (e *Engine) FieldManager() string { return e.fieldManager }

// AnnotationManager is the field manager of the annotations the controller
// records on objects it does not otherwise write (a claim's binding
// annotations) or writes apart from the rest (a Sandbox's pod-name): an
// apply of only those annotations under FieldManager would give up, and so
// remove, everything else FieldManager applied.
func (e *Engine) AnnotationManager() string { return e.fieldManager + "-annotations" }

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
	// Extractions counts the extractions of what a manager owns that
	// were computed; ExtractionsRemembered those answered from memory.
	Extractions, ExtractionsRemembered int64
}

// Saved counts a write a caller did not send because it knew the server
// already had it (for the same counter as the engine's own diff).
func (e *Engine) Saved(kind, namespace, name string) {
	e.skipped.Add(1)
	e.observe(Change{Kind: kind, Namespace: namespace, Name: name, Action: Unchanged})
}

// SavedStatus is Saved for the status of an object of kind.
func (e *Engine) SavedStatus(kind, namespace, name string) {
	e.Saved(statusChangeKind(kind), namespace, name)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Applies: e.applies.Load(), Skipped: e.skipped.Load(), Deletes: e.deletes.Load(), NoOps: e.noops.Load(),
		Extractions: e.extractions.misses.Load(), ExtractionsRemembered: e.extractions.hits.Load()}
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
	// adoption, where the user asked us to take an object over, and for
	// the annotations the controller alone decides.
	Force bool
	// Manager is the field manager to apply as; empty: FieldManager.
	Manager string
	// CreateOnly, for an object the caller sees none of (live nil), lets
	// the apply only create it (CreateOnlyVersion): one that exists after
	// all, which the cache has not shown yet (someone else's, made a
	// moment ago), is not written to. The change is then Unchanged and
	// Pending, so the caller looks again once the cache shows the object
	// and judges it (ours, adoptable, or in the way).
	CreateOnly bool
}

func (e *Engine) manager(opts Options) string {
	if opts.Manager != "" {
		return opts.Manager
	}
	return e.fieldManager
}

// Apply applies desired unless what our field manager owns of live already
// equals it. live is the object as the cache holds it, or nil when it does not
// exist; extract is the generated Extract function of its kind (ExtractPod,
// ExtractSandbox, ...).
func Apply[O client.Object, AC ApplyConfiguration](ctx context.Context, e *Engine, kind string, desired AC, live O,
	extract func(O, string) (AC, error), opts Options) (change Change, err error) {
	change = Change{Kind: kind, Namespace: deref(desired.GetNamespace()), Name: deref(desired.GetName()), Action: Created}
	defer func() { e.observeOK(change, err) }()
	manager := e.manager(opts)
	// What each of our managers wrote is remembered apart.
	memo := objectKey(kind, manager, change.Namespace, change.Name)
	if isNil(live) {
		release, err := e.creates.await(ctx, memo)
		if err != nil {
			return change, err
		}
		defer release()
	}
	if isNil(live) && e.recentlyCreated(memo, desired) {
		e.skipped.Add(1)
		change.Action, change.Pending = Unchanged, true
		return change, nil
	}
	if !isNil(live) {
		e.dropShown(memo, live)
		same, err := e.ownsDesired(memo, live, desired, func() (any, error) { return extractRemembered(e, kind, live, manager, "", extract, false) })
		if err != nil {
			return change, fmt.Errorf("extracting the fields %s owns of %s: %w", manager, kind, err)
		}
		if same {
			e.skipped.Add(1)
			change.Action = Unchanged
			return change, nil
		}
		change.Action = Configured
	}
	sent := Fingerprint(desired)
	if !isNil(live) && e.aheadOfCache(memo, live, desired, sent) {
		e.skipped.Add(1)
		change.Action, change.Pending = Unchanged, true
		return change, nil
	}
	applyOpts := []client.ApplyOption{client.FieldOwner(manager)}
	if opts.Force {
		applyOpts = append(applyOpts, client.ForceOwnership)
	}
	exists := false
	done := e.sending(memo)
	if isNil(live) && opts.CreateOnly {
		exists, err = e.applyCreating(ctx, kind, desired, applyOpts...)
	} else {
		e.applies.Add(1)
		err = e.client.Apply(ctx, desired, applyOpts...)
	}
	if err != nil {
		done("", "", err)
		return change, wrapConflict(kind, change, err)
	}
	if exists {
		// Not ours to write to until the cache shows it and the caller
		// has judged it.
		done("", "", nil)
		change.Action, change.Pending = Unchanged, true
		return change, nil
	}
	done(e.noteWrite(memo, versionOf(live), change.Action == Created, desired, sent), digest(sent), nil)
	return change, nil
}

// ApplyStatus applies desired (an apply configuration holding only status) to
// the status subresource unless what the status manager owns already equals
// it. Status has a single writer, so ownership is forced.
func ApplyStatus[O client.Object, AC ApplyConfiguration](ctx context.Context, e *Engine, kind string, desired AC, live O,
	extractStatus func(O, string) (AC, error)) (change Change, err error) {
	change = Change{Kind: statusChangeKind(kind), Namespace: deref(desired.GetNamespace()), Name: deref(desired.GetName()), Action: Configured}
	defer func() { e.observeOK(change, err) }()
	memo := e.statusKey(kind, change.Namespace, change.Name)
	same, err := e.ownsDesired(memo, live, desired, func() (any, error) {
		return extractRemembered(e, kind, live, e.statusManager, "status", extractStatus, false)
	})
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
	done := e.sending(memo)
	if err := e.client.Status().Apply(ctx, desired, client.FieldOwner(e.statusManager), client.ForceOwnership); err != nil {
		done("", "", err)
		return change, fmt.Errorf("applying %s status: %w", kind, err)
	}
	done(e.noteWrite(memo, versionOf(live), false, desired, sent), digest(sent), nil)
	return change, nil
}

// versionOf is live's resourceVersion, "" when there is none.
func versionOf(live client.Object) string {
	if isNil(live) {
		return ""
	}
	return live.GetResourceVersion()
}

// statusChangeKind is how a change to the status of an object of kind is
// reported in a change set (SandboxStatus, for a Sandbox's).
func statusChangeKind(kind string) string { return kind + "Status" }
