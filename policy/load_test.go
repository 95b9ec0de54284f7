package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestWatchReloadsAndKeepsTheLastGoodSet(t *testing.T) {
	dir := t.TempDir()
	src, _ := Bundle(BundleBaseline)
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, src.Data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: dir}
	first, err := LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &Holder{}
	h.Set(first)
	var mu sync.Mutex
	var loads, errs int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, cfg, h, 10*time.Millisecond,
			func(*Set) { mu.Lock(); loads++; mu.Unlock() },
			func(error) { mu.Lock(); errs++; mu.Unlock() })
	}()
	defer func() { cancel(); <-done }()
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// An invalid edit: reported, and the set in force stays.
	if err := os.WriteFile(file, []byte(strings.Replace(string(src.Data), "has(v.hostPath)", "has(v.hostPath", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	wait("the error", func() bool { mu.Lock(); defer mu.Unlock(); return errs > 0 })
	if h.Get() != first {
		t.Fatal("an invalid policy replaced the last good set")
	}
	// A valid edit (Warn instead of Deny) takes over without a restart.
	if err := os.WriteFile(file, []byte(strings.Replace(string(src.Data), "[Deny]", "[Warn]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	wait("the reload", func() bool { mu.Lock(); defer mu.Unlock(); return loads > 0 })
	if h.Get() == first {
		t.Fatal("the set was not replaced")
	}
	ds, _ := h.Get().CheckAll(context.Background(), sandboxPod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }))
	if len(ds) != 1 || ds[0].Action != Warn {
		t.Errorf("after reload: %v, want one Warn", ds)
	}
}
