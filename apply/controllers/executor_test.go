package controllers

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// recording is an executor whose hooks record the steps they are given, in
// order, and fail the step named fail.
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
		creates: func(_ context.Context, run []render.Step) (ssa.ChangeSet, error) {
			var cs ssa.ChangeSet
			var err error
			for _, s := range run {
				cs = append(cs, ssa.Change{Kind: s.Kind, Name: s.Name, Action: ssa.Created})
				err = errors.Join(err, note(s))
			}
			*got = append(*got, "end of run")
			return cs, err
		},
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
	want := []string{"delete d", "create c1", "create c2", "end of run", "event e", "status s", "annotate a", "status end"}
	if !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q (a run of creates at once, a status step that ends the plan ends it)", got, want)
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
		if slices.Contains(got, "event after") {
			t.Errorf("%s failing: the run went on past it: %q", fail, got)
		}
		if want := fail; fail == "c2" {
			if done.failed.Name != "c1" {
				t.Errorf("a run of creates failing names %s, want its first step", done.failed.Name)
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
