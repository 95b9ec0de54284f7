package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// takenHold is how long a member handed to a claim stays out of the queue
// while the informer still shows it as a pool member (the claim's adoption
// patch may be in flight). After that it is offered again, from the last
// copy the informer showed, without waiting for another event; the
// adoption's resourceVersion precondition still keeps two claims apart.
// A member the pool withdrew to delete is held out as long.
const takenHold = 30 * time.Second

// WarmQueue holds, per warm pool, the Ready members a claim may take, in the
// order they became available. The Sandbox informer feeds it, so a claim
// finds a member without listing anything. It is also where a claim and its
// pool meet: Take hands each member to one claim only, and Withdraw lets the
// pool remove a member from the queue before deleting it, refusing members a
// claim holds. A member is therefore never both taken and deleted by this
// process; resourceVersion preconditions on both writes cover every other
// writer.
type WarmQueue struct {
	mu sync.Mutex
	// pools maps a pool (namespace and name) to its available members.
	pools map[types.NamespacedName]*memberQueue
	// where maps a member to its pool, to remove it when it changes.
	where map[types.NamespacedName]types.NamespacedName
	// held are members out of the queue for a while: taken by a claim, or
	// withdrawn by the pool, with the latest copy the informer showed.
	held map[types.UID]*hold
	// lastTake is, per pool, when a claim last took a member.
	lastTake map[types.NamespacedName]time.Time
	// waiting are, per pool, the claims that wait for a member of it
	// (ClaimHandler), and waitingIn the pool each waits in.
	waiting   map[types.NamespacedName]map[types.UID]struct{}
	waitingIn map[types.UID]types.NamespacedName
	// moved is, per pool with waiting claims, when its claims last moved:
	// one began to wait, took a member or stopped waiting.
	moved map[types.NamespacedName]time.Time
	// parked are the Sandboxes whose reconcile waits for a claim's commit
	// or a burst's end, and wake what wakes them (warmqueue_park.go).
	parked map[types.NamespacedName]parkSpot
	wake   func(types.NamespacedName)
	now    func() time.Time
}

type holdKind int

const (
	heldTaken holdKind = iota + 1
	heldWithdrawn
)

type hold struct {
	kind   holdKind
	at     time.Time
	latest *sandboxv1beta1.Sandbox
}

type memberQueue struct {
	order   []types.NamespacedName
	members map[types.NamespacedName]*sandboxv1beta1.Sandbox
}

// NewWarmQueue returns an empty queue.
func NewWarmQueue() *WarmQueue {
	return &WarmQueue{
		pools:     map[types.NamespacedName]*memberQueue{},
		where:     map[types.NamespacedName]types.NamespacedName{},
		held:      map[types.UID]*hold{},
		lastTake:  map[types.NamespacedName]time.Time{},
		waiting:   map[types.NamespacedName]map[types.UID]struct{}{},
		waitingIn: map[types.UID]types.NamespacedName{},
		moved:     map[types.NamespacedName]time.Time{},
		parked:    map[types.NamespacedName]parkSpot{},
		now:       time.Now,
	}
}

// Handler returns the informer event handler that keeps the queue current.
func (q *WarmQueue) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { q.observe(obj) },
		UpdateFunc: func(_, obj any) { q.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if sb, ok := obj.(*sandboxv1beta1.Sandbox); ok {
				q.mu.Lock()
				defer q.mu.Unlock()
				key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
				q.remove(key)
				delete(q.held, sb.UID)
				delete(q.parked, key)
			}
		},
	}
}

// poolOf returns the pool that controls sb, if a pool does: its
// controller reference names a SandboxWarmPool of our API group (one of
// another group is not a pool). Which pool object it is, by UID, is for the
// taker to check (render.ClaimMayTake).
func poolOf(sb *sandboxv1beta1.Sandbox) (types.NamespacedName, bool) {
	ref := extv1beta1.PoolOf(sb)
	if ref == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: sb.Namespace, Name: ref.Name}, true
}

// claimable reports a member a claim may take now.
func claimable(sb *sandboxv1beta1.Sandbox) bool {
	_, member := poolOf(sb)
	return member && sb.DeletionTimestamp == nil && render.IsSandboxReady(sb) &&
		sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended
}

func (q *WarmQueue) observe(obj any) {
	sb, ok := obj.(*sandboxv1beta1.Sandbox)
	if !ok {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.offer(sb)
}

// offer queues sb if a claim may take it, or removes it. Callers hold q.mu.
func (q *WarmQueue) offer(sb *sandboxv1beta1.Sandbox) {
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	if _, member := poolOf(sb); !member {
		// Adopted by a claim (or never a member): it leaves for good.
		q.remove(key)
		delete(q.held, sb.UID)
		return
	}
	if h, ok := q.held[sb.UID]; ok {
		h.latest = sb
		if q.now().Sub(h.at) < takenHold {
			q.remove(key)
			return
		}
		delete(q.held, sb.UID)
	}
	if !claimable(sb) {
		q.remove(key)
		return
	}
	pool, _ := poolOf(sb)
	if old, ok := q.where[key]; ok && old != pool {
		q.remove(key)
	}
	mq := q.pools[pool]
	if mq == nil {
		mq = &memberQueue{members: map[types.NamespacedName]*sandboxv1beta1.Sandbox{}}
		q.pools[pool] = mq
	}
	if _, queued := mq.members[key]; !queued {
		mq.order = append(mq.order, key)
	}
	mq.members[key] = sb
	q.where[key] = pool
}

// release offers again the members whose hold ran out, from the last copy
// the informer showed: a member whose adoption never happened does not wait
// for the next event (which may be a resync away). Callers hold q.mu.
func (q *WarmQueue) release() {
	now := q.now()
	for uid, h := range q.held {
		if now.Sub(h.at) < takenHold {
			continue
		}
		delete(q.held, uid)
		if h.latest != nil {
			q.offer(h.latest)
		}
	}
}

// remove drops a member from its pool's queue. Callers hold q.mu.
func (q *WarmQueue) remove(key types.NamespacedName) {
	pool, ok := q.where[key]
	if !ok {
		return
	}
	delete(q.where, key)
	mq := q.pools[pool]
	if mq == nil {
		return
	}
	delete(mq.members, key)
	for i, k := range mq.order {
		if k == key {
			mq.order = append(mq.order[:i], mq.order[i+1:]...)
			break
		}
	}
	if len(mq.order) == 0 {
		delete(q.pools, pool)
		// A burst with nothing left to take may end (Serving).
		q.wakeParked("", pool)
	}
}

// Take hands out the pool's longest-waiting Ready member that accept
// approves (nil accepts any), or nil when it has none. Members accept
// refuses stay queued. The member is the informer's copy: read it, do not
// change it.
func (q *WarmQueue) Take(pool types.NamespacedName, accept func(*sandboxv1beta1.Sandbox) bool) *sandboxv1beta1.Sandbox {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release()
	mq := q.pools[pool]
	if mq == nil {
		return nil
	}
	for _, key := range mq.order {
		sb := mq.members[key]
		if accept != nil && !accept(sb) {
			continue
		}
		q.remove(key)
		q.held[sb.UID] = &hold{kind: heldTaken, at: q.now(), latest: sb}
		q.lastTake[pool] = q.now()
		if len(q.waiting[pool]) > 0 {
			q.moved[pool] = q.now()
		}
		return sb
	}
	return nil
}

// Withdraw takes a member out of the queue because its pool is about to
// delete it, so no claim can take it meanwhile. It returns false, and the
// pool must not delete the member, when a claim holds it (its adoption may
// be in flight). A withdrawn member stays out until it is gone, Restore puts
// it back, or the hold runs out.
func (q *WarmQueue) Withdraw(sb *sandboxv1beta1.Sandbox) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if h, ok := q.held[sb.UID]; ok && h.kind == heldTaken && q.now().Sub(h.at) < takenHold {
		return false
	}
	q.remove(types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name})
	q.held[sb.UID] = &hold{kind: heldWithdrawn, at: q.now(), latest: sb}
	return true
}

// Restore undoes a Withdraw whose delete did not happen.
func (q *WarmQueue) Restore(sb *sandboxv1beta1.Sandbox) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h, ok := q.held[sb.UID]
	if !ok || h.kind != heldWithdrawn {
		return
	}
	delete(q.held, sb.UID)
	q.offer(h.latest)
}

// LastTake returns when a claim last took a member of the pool (zero if
// never, as far as this process knows).
func (q *WarmQueue) LastTake(pool types.NamespacedName) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastTake[pool]
}

// Return puts back a member taken but not adopted, so other claims may have
// it: the latest copy the informer showed (later events keep it current),
// or sb if it showed none.
func (q *WarmQueue) Return(sb *sandboxv1beta1.Sandbox) {
	q.mu.Lock()
	defer q.mu.Unlock()
	latest := sb
	if h, ok := q.held[sb.UID]; ok {
		if h.kind != heldTaken {
			return
		}
		if h.latest != nil {
			latest = h.latest
		}
		delete(q.held, sb.UID)
	}
	q.offer(latest)
}

// Len returns the number of members available in a pool.
func (q *WarmQueue) Len(pool types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release()
	if mq := q.pools[pool]; mq != nil {
		return len(mq.order)
	}
	return 0
}
