package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// recording is an executor whose hooks record the steps they are given, in
// order, and fail the step named fail. Creates run one at a time.
func recording(fail string, got *[]string) executor {
	note := func(s render.Step) error {
		*got = append(*got, string(s.Action)+" "+s.Name)
		if s.Name == fail {
			return errors.New("refused")
		}
		return nil
	}
	return executor{
		event: func(s render.Step) { _ = note(s) },
		status: func(_ context.Context, s render.Step, changes ssa.ChangeSet) (bool, error) {
			return s.Immediate, note(s)
		},
		own: func(_ context.Context, s render.Step) (*ssa.Change, bool, error) {
			return &ssa.Change{Kind: s.Kind, Name: s.Name, Action: ssa.Configured}, true, note(s)
		},
		create: func(_ context.Context, s render.Step) (ssa.Change, error) {
			return ssa.Change{Kind: s.Kind, Name: s.Name, Action: ssa.Created}, note(s)
		},
		parallel: 1, // one at a time: the order is the plan's
	}
}

func TestExecutorRunsStepsInOrder(t *testing.T) {
	plan := render.Plan{Steps: []render.Step{
		{Action: render.ActionDelete, Name: "d"},
		{Action: render.ActionCreate, Name: "c1"},
		{Action: render.ActionCreate, Name: "c2"},
		{Action: render.ActionEvent, Name: "e"},
		{Action: render.ActionStatus, Name: "s"},
		{Action: render.ActionAnnotate, Name: "a"},
		{Action: render.ActionStatus, Name: "end", Immediate: true},
		{Action: render.ActionApply, Name: "never"},
	}}
	var got []string
	done, err := recording("", &got).run(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"delete d", "create c1", "create c2", "event e", "status s", "annotate a", "status end"}
	if !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q (a status step that ends the plan ends it)", got, want)
	}
	if done.created != 2 || len(done.changes) != 4 || done.failed != nil {
		t.Errorf("created %d, changes %v, failed %v", done.created, done.changes, done.failed)
	}
}

func TestExecutorStopsAtTheFirstFailure(t *testing.T) {
	for _, fail := range []string{"d", "c2", "s"} {
		plan := render.Plan{Steps: []render.Step{
			{Action: render.ActionDelete, Name: "d"},
			{Action: render.ActionCreate, Name: "c1"},
			{Action: render.ActionCreate, Name: "c2"},
			{Action: render.ActionStatus, Name: "s"},
			{Action: render.ActionEvent, Name: "after"},
		}}
		var got []string
		done, err := recording(fail, &got).run(context.Background(), plan)
		if err == nil || done.failed == nil {
			t.Fatalf("%s failing: the run did not fail", fail)
		}
		if slices.Contains(got, "event after") || (fail == "c2" && !slices.Contains(got, "create c1")) {
			t.Errorf("%s failing: the run went on past it, or a run of creates stopped at it: %q", fail, got)
		}
		if want := fail; fail == "c2" {
			if done.failed.Name != "c1" || len(done.changes) != 2 {
				t.Errorf("a run of creates failing names %s, want its first step; changes %v, want the delete's and c1's", done.failed.Name, done.changes)
			}
		} else if done.failed.Name != want {
			t.Errorf("failed step %s, want %s", done.failed.Name, want)
		}
	}
}

// A status step with no status writer fails rather than being skipped.
func TestExecutorWithoutStatusWriterFails(t *testing.T) {
	plan := render.Plan{Steps: []render.Step{{Action: render.ActionStatus, Name: "s"}}}
	if _, err := (executor{}).run(context.Background(), plan); err == nil {
		t.Error("a status step ran without a status writer")
	}
}

func TestAfter(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) render.Plan {
		return render.Plan{RecheckAt: &metav1.Time{Time: now.Add(d)}}
	}
	for name, tc := range map[string]struct {
		plan    render.Plan
		pending bool
		want    time.Duration
	}{
		"nothing due":             {plan: render.Plan{}},
		"recheck":                 {plan: at(time.Minute), want: time.Minute},
		"pending caps a recheck":  {plan: at(time.Hour), pending: true, want: ssa.CreateExpectation},
		"pending alone":           {plan: render.Plan{}, pending: true, want: ssa.CreateExpectation},
		"an earlier recheck wins": {plan: at(time.Millisecond), pending: true, want: time.Millisecond},
	} {
		if got := after(tc.plan, tc.pending, ssa.CreateExpectation, now).RequeueAfter; got != tc.want {
			t.Errorf("%s: requeue after %v, want %v", name, got, tc.want)
		}
	}
}

// A run of creates goes concurrently, at most parallel at a time, and
// every failure in it is returned.
func TestExecutorCreatesARunConcurrently(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	x := executor{parallel: 2, create: func(_ context.Context, s render.Step) (ssa.Change, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		if s.Name == "bad1" || s.Name == "bad2" {
			return ssa.Change{}, errors.New(s.Name)
		}
		return ssa.Change{Name: s.Name, Action: ssa.Created}, nil
	}}
	plan := render.Plan{Steps: []render.Step{
		{Action: render.ActionCreate, Name: "a"}, {Action: render.ActionCreate, Name: "bad1"},
		{Action: render.ActionCreate, Name: "b"}, {Action: render.ActionCreate, Name: "bad2"},
	}}
	go func() {
		// Held until two run at once (or a second has passed: a run one
		// at a time fails the test below).
		for deadline := time.Now().Add(time.Second); most.Load() < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		for range plan.Steps {
			release <- struct{}{}
		}
	}()
	done, err := x.run(context.Background(), plan)
	if err == nil || len(done.changes) != 2 || done.created != 4 {
		t.Fatalf("err %v, changes %v, created %d", err, done.changes, done.created)
	}
	if msg := err.Error(); !strings.Contains(msg, "bad1") || !strings.Contains(msg, "bad2") {
		t.Errorf("the run's error %q does not hold every failure", msg)
	}
	if most.Load() != 2 {
		t.Errorf("at most %d creates at a time, want 2", most.Load())
	}
}
