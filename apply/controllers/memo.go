package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusMemory remembers, per object, the status this process last wrote.
// The cache lags behind our own writes; deriving status from a stale copy
// would restamp transition times and write the same status again. Only the
// controller writes these statuses, so what it wrote last is the truth
// until the object goes away (or the process restarts and starts over from
// the cache).
type statusMemory struct {
	m sync.Map // types.NamespacedName -> *statusMemo
}

type statusMemo struct {
	uid         types.UID
	fingerprint string
	conditions  []metav1.Condition
	at          time.Time
	// rv is the resourceVersion our last write produced, when known.
	rv string
}

// recall returns the memo for o, nil when there is none for this object.
func (s *statusMemory) recall(o client.Object) *statusMemo {
	v, ok := s.m.Load(client.ObjectKeyFromObject(o))
	if !ok {
		return nil
	}
	m := v.(*statusMemo)
	if m.uid != o.GetUID() {
		return nil
	}
	return m
}

// previous returns the conditions last written for o, or nil to use o's own.
func (s *statusMemory) previous(o client.Object) []metav1.Condition {
	if m := s.recall(o); m != nil {
		return m.conditions
	}
	return nil
}

// written reports that the status with this fingerprint is what we last wrote.
func (s *statusMemory) written(o client.Object, fingerprint string) bool {
	m := s.recall(o)
	return m != nil && m.fingerprint == fingerprint
}

func (s *statusMemory) remember(o client.Object, fingerprint string, conditions []metav1.Condition, at time.Time) {
	s.m.Store(client.ObjectKeyFromObject(o), &statusMemo{uid: o.GetUID(), fingerprint: fingerprint, conditions: conditions, at: at})
}

// rememberVersion records the resourceVersion our last write produced.
func (s *statusMemory) rememberVersion(o client.Object, rv string) {
	if m := s.recall(o); m != nil && rv != "" {
		c := *m
		c.rv = rv
		s.m.Store(client.ObjectKeyFromObject(o), &c)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *statusMemory) forget(key types.NamespacedName) { s.m.Delete(key) }

// conditionsOf copies the conditions of a status apply configuration.
func conditionsOf(in []metav1ac.ConditionApplyConfiguration) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(in))
	for _, c := range in {
		out = append(out, metav1.Condition{
			Type: *c.Type, Status: *c.Status, Reason: *c.Reason, Message: *c.Message,
			ObservedGeneration: *c.ObservedGeneration, LastTransitionTime: *c.LastTransitionTime,
		})
	}
	return out
}
