package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentsandbox/reconciler/apply/ssa"
	"github.com/agentsandbox/reconciler/render"
)

// executor is the one interpreter of a render.Plan: it runs the plan's steps
// in order and stops at the first that fails. Object steps (apply,
// apply-force, create, adopt, guarded delete, annotate) go through execute;
// a run of consecutive create steps goes concurrently to create when it is
// set; event
// and status steps go to the reconciler's hooks, which hold its memory of
// what it last reported and wrote. It decides nothing a plan does not say:
// a step the reconciler carries out itself (own) is one whose request its
// memory may spare, or that the warm queue guards.
type executor struct {
	engine *ssa.Engine
	// event records an event step; nil: events are not recorded.
	event func(s render.Step)
	// status writes a status step, told what the steps before it changed;
	// end reports that the plan ends there. Nil: a status step fails.
	status func(ctx context.Context, s render.Step, changes ssa.ChangeSet) (end bool, err error)
	// own carries out the steps the reconciler keeps for itself; handled
	// false leaves the step to execute. A nil change is no change.
	own func(ctx context.Context, s render.Step) (c *ssa.Change, handled bool, err error)
	// create carries out one step of a run of consecutive create steps
	// (independent of each other: a pool's members), up to parallel at a
	// time; the run fails with every error its steps met. Nil: create
	// steps go through execute, one at a time.
	create   func(ctx context.Context, s render.Step) (ssa.Change, error)
	parallel int
}

// ran is what running a plan did.
type ran struct {
	// changes are what the object steps changed.
	changes ssa.ChangeSet
	// failed is the step that failed (the first of a run of creates), nil
	// when none did.
	failed *render.Step
	// created counts the create steps carried out.
	created int
}

// run carries out plan's steps in order, stopping at the first that fails
// (its error is returned and ran.failed names the step) or at a status
// step that ends the plan.
func (x executor) run(ctx context.Context, plan render.Plan) (ran, error) {
	var out ran
	steps := plan.Steps
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		switch s.Action {
		case render.ActionEvent:
			if x.event != nil {
				x.event(s)
			}
			continue
		case render.ActionStatus:
			if x.status == nil {
				out.failed = &steps[i]
				return out, fmt.Errorf("plan step %s %s %s: no status writer", s.Action, s.Kind, s.Name)
			}
			end, err := x.status(ctx, s, out.changes)
			if err != nil || end {
				if err != nil {
					out.failed = &steps[i]
				}
				return out, err
			}
			continue
		case render.ActionCreate:
			if x.create != nil {
				j := i + 1
				for j < len(steps) && steps[j].Action == render.ActionCreate {
					j++
				}
				cs, err := x.creates(ctx, steps[i:j])
				out.changes = append(out.changes, cs...)
				out.created += j - i
				if err != nil {
					out.failed = &steps[i]
					return out, err
				}
				i = j - 1
				continue
			}
			out.created++
		}
		if x.own != nil {
			c, handled, err := x.own(ctx, s)
			if handled {
				if c != nil {
					out.changes = append(out.changes, *c)
				}
				if err != nil {
					out.failed = &steps[i]
					return out, err
				}
				continue
			}
		}
		c, err := execute(ctx, x.engine, s)
		out.changes = append(out.changes, c)
		if err != nil {
			out.failed = &steps[i]
			return out, err
		}
	}
	return out, nil
}

// creates carries out a run of create steps through x.create, x.parallel
// at a time, and returns the changes of those that succeeded and the
// errors of the others.
func (x executor) creates(ctx context.Context, run []render.Step) (ssa.ChangeSet, error) {
	var (
		mu      sync.Mutex
		changes ssa.ChangeSet
		errs    []error
		wg      sync.WaitGroup
		slots   = make(chan struct{}, max(x.parallel, 1))
	)
	for _, s := range run {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			c, err := x.create(ctx, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			changes = append(changes, c)
		}()
	}
	wg.Wait()
	return changes, errors.Join(errs...)
}

// after is when to look at the object again once a plan ran: at the plan's
// recheck, and no later than the create expectation when something created
// is not in the cache yet (pending; if it never shows up, deleted at once,
// no watch event brings the object back).
func after(plan render.Plan, pending bool, expectation time.Duration, now time.Time) reconcile.Result {
	var result reconcile.Result
	if plan.RecheckAt != nil {
		result.RequeueAfter = plan.RecheckAt.Sub(now)
	}
	if pending && (result.RequeueAfter == 0 || result.RequeueAfter > expectation) {
		result.RequeueAfter = expectation
	}
	return result
}
