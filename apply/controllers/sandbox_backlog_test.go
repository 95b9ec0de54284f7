package controllers

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStatusBacklogWindow(t *testing.T) {
	var b statusBacklog
	base := 5 * time.Second
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("sb-%d", i)}
	}
	for i := range busyBacklog {
		b.wait(key(i))
		b.wait(key(i)) // deferred again: counted once
	}
	if got := b.window(base); got != base {
		t.Fatalf("with %d waiting the window is %s, want %s", busyBacklog, got, base)
	}
	b.wait(key(busyBacklog))
	if got := b.window(base); got != busyFactor*base {
		t.Fatalf("with %d waiting the window is %s, want %s", busyBacklog+1, got, busyFactor*base)
	}
	b.done(key(0))
	b.done(key(0)) // written, then forgotten: counted once
	b.done(key(9999))
	if got := b.window(base); got != base {
		t.Fatalf("after one was written the window is %s, want %s", got, base)
	}
	if n := b.n.Load(); n != busyBacklog {
		t.Errorf("count %d, want %d", n, busyBacklog)
	}
}
