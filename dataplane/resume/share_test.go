package resume

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroupSharesOneRun(t *testing.T) {
	var g Group
	var runs, started atomic.Int64
	release := make(chan struct{})
	errDone := errors.New("the run's result")
	var wg sync.WaitGroup
	const n = 20
	for range n {
		wg.Go(func() {
			s, err := g.Do(context.Background(), "team/box/uid", func(context.Context) error {
				runs.Add(1)
				<-release
				return errDone
			})
			if s {
				started.Add(1)
			}
			if !errors.Is(err, errDone) {
				t.Errorf("a caller got %v", err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // all callers waiting
	close(release)
	wg.Wait()
	if runs.Load() != 1 || started.Load() != 1 {
		t.Errorf("%d runs, %d callers started one; want 1 and 1", runs.Load(), started.Load())
	}
	// Once done, the next call runs again.
	if s, err := g.Do(context.Background(), "team/box/uid", func(context.Context) error { return nil }); !s || err != nil {
		t.Errorf("a later call: started %v, %v", s, err)
	}
}

// TestGroupCancelledCaller: the caller that started a run gives up; the
// run goes on (its context is its own) and others still get its result.
func TestGroupCancelledCaller(t *testing.T) {
	var g Group
	release := make(chan struct{})
	runErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "k", func(rctx context.Context) error {
			<-release
			runErr <- rctx.Err()
			return nil
		})
		first <- err
	}()
	time.Sleep(50 * time.Millisecond)
	second := make(chan error, 1)
	go func() {
		s, err := g.Do(context.Background(), "k", func(context.Context) error { t.Error("a second run"); return nil })
		if s {
			t.Error("the second caller started a run")
		}
		second <- err
	}()
	time.Sleep(50 * time.Millisecond) // the second caller waits for the run
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled caller: %v", err)
	}
	close(release)
	if err := <-runErr; err != nil {
		t.Errorf("the run's context ended with its caller: %v", err)
	}
	if err := <-second; err != nil {
		t.Errorf("the other caller: %v", err)
	}
}

func TestGroupTimeout(t *testing.T) {
	g := Group{Timeout: 50 * time.Millisecond}
	start := time.Now()
	_, err := g.Do(context.Background(), "k", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("a run past Timeout: %v after %s", err, time.Since(start))
	}
}
