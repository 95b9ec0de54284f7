package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// takenHold is how long a member handed to a claim stays out of the queue
// while the informer still shows it as a pool member (the claim's adoption
// patch may be in flight). After that it may be offered again; the
// adoption's resourceVersion precondition still keeps two claims apart.
const takenHold = 30 * time.Second

// WarmQueue holds, per warm pool, the Ready members a claim may take, in the
// order they became available. The Sandbox informer feeds it, so a claim
// finds a member without listing anything; Take hands each member to one
// caller only.
type WarmQueue struct {
	mu sync.Mutex
	// pools maps a pool (namespace and name) to its available members.
	pools map[types.NamespacedName]*memberQueue
	// where maps a member to its pool, to remove it when it changes.
	where map[types.NamespacedName]types.NamespacedName
	// taken are members handed out, with when.
	taken map[types.UID]time.Time
	// lastTake is, per pool, when a claim last took a member.
	lastTake map[types.NamespacedName]time.Time
	now      func() time.Time
}

type memberQueue struct {
	order   []types.NamespacedName
	members map[types.NamespacedName]*sandboxv1beta1.Sandbox
}

// NewWarmQueue returns an empty queue.
func NewWarmQueue() *WarmQueue {
	return &WarmQueue{
		pools:    map[types.NamespacedName]*memberQueue{},
		where:    map[types.NamespacedName]types.NamespacedName{},
		taken:    map[types.UID]time.Time{},
		lastTake: map[types.NamespacedName]time.Time{},
		now:      time.Now,
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
				q.remove(types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name})
				delete(q.taken, sb.UID)
			}
		},
	}
}

// poolOf returns the pool that controls sb, if a pool does.
func poolOf(sb *sandboxv1beta1.Sandbox) (types.NamespacedName, bool) {
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != "SandboxWarmPool" {
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
	key := types.NamespacedName{Namespace: sb.Namespace, Name: sb.Name}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !claimable(sb) {
		q.remove(key)
		if _, member := poolOf(sb); !member {
			delete(q.taken, sb.UID)
		}
		return
	}
	if at, ok := q.taken[sb.UID]; ok {
		if q.now().Sub(at) < takenHold {
			return
		}
		delete(q.taken, sb.UID)
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
	}
}

// Take hands out the pool's longest-waiting Ready member, or nil when it has
// none. The member is the informer's copy: read it, do not change it.
func (q *WarmQueue) Take(pool types.NamespacedName) *sandboxv1beta1.Sandbox {
	q.mu.Lock()
	defer q.mu.Unlock()
	mq := q.pools[pool]
	if mq == nil || len(mq.order) == 0 {
		return nil
	}
	key := mq.order[0]
	sb := mq.members[key]
	q.remove(key)
	q.taken[sb.UID] = q.now()
	q.lastTake[pool] = q.now()
	return sb
}

// LastTake returns when a claim last took a member of the pool (zero if
// never, as far as this process knows).
func (q *WarmQueue) LastTake(pool types.NamespacedName) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastTake[pool]
}

// Return puts back a member taken but not adopted (the adoption failed for a
// reason unrelated to the member), so other claims may have it.
func (q *WarmQueue) Return(sb *sandboxv1beta1.Sandbox) {
	q.mu.Lock()
	delete(q.taken, sb.UID)
	q.mu.Unlock()
	q.observe(sb)
}

// Len returns the number of members available in a pool.
func (q *WarmQueue) Len(pool types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if mq := q.pools[pool]; mq != nil {
		return len(mq.order)
	}
	return 0
}
