package localcluster

import (
	"context"
	"testing"
	"time"
)

// Creates are one at a time across processes: a second waits for the
// first's unlock, and gives up with its context.
func TestCreateLockWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	unlock, err := lockCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if u, err := lockCreate(short); err == nil {
		u()
		t.Fatal("a second create took the lock while the first held it")
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockCreate(ctx)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second create went ahead before the unlock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second create still waits after the unlock")
	}
}
