package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// Resume on connect, as the SDK does it where no router does it for it
// (port-forward and base URLs): a call that finds the sandbox's Pod gone
// looks at the Sandbox and, if it is Suspended and opted in (annotation
// agents.x-k8s.io/resume-on-connect=true or agents.x-k8s.io/idle-timeout),
// sets it Running with the caller's credentials, waits for it to be Ready
// and its runtime to answer, and sends the call again: it never reached the
// runtime, so this is safe for Run and Write too. Concurrent calls share
// one resume. Through a router, the router does all of this.

// activityReportMax bounds the interval between last-activity reports the
// SDK makes for a Sandbox with idle suspend (see resume.Interval).
const activityReportMax = 30 * time.Second

// podGone is a port-forward refused because the Pod does not exist.
type podGone struct{ error }

func (p podGone) Unwrap() error { return p.error }

// resumeGroup shares one resume (the write) per Sandbox among all the
// handles and Opens of a process; wakeGroup shares one wake (the resume and
// the wait for Ready and the runtime) among the calls that found the Pod
// gone. They are apart so that a call joining an Open's resume, which does
// not wait, still waits before it is sent again.
var resumeGroup, wakeGroup resume.Group

// suspendedError is the error of a call to a Suspended Sandbox that did not
// opt in to resume on connect.
func suspendedError(namespace, name string) error {
	return fmt.Errorf("sandbox %s/%s is suspended and does not resume on connect; to let it, %s: %w",
		namespace, name, sandboxv1beta1.OptInHint, ErrSuspended)
}

// wake brings a Sandbox whose Pod is gone back, if it opted in, and
// returns once it is Ready and its runtime answers.
func (s *Sandbox) wake(ctx context.Context) error {
	c := s.client
	if c == nil {
		return errors.New("no Kubernetes client to resume the sandbox with")
	}
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.sandboxes.Get().Namespace(s.namespace).Resource("sandboxes").Name(s.name).Do(ctx).Into(sb); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("sandbox %s/%s: %w (%w)", s.namespace, s.name, ErrDeleted, ErrNotFound)
		}
		return fmt.Errorf("sandbox %s/%s: %w", s.namespace, s.name, err)
	}
	if s.uid != "" && sb.UID != s.uid {
		// The name stands for another sandbox now: to this handle, its
		// sandbox is gone.
		return fmt.Errorf("sandbox %s/%s (UID %s) no longer exists; the name is another sandbox's: %w (%w)",
			s.namespace, s.name, s.uid, ErrDeleted, ErrNotFound)
	}
	policy, _ := sandboxv1beta1.ResumePolicyOf(sb.Annotations)
	s.setPolicy(policy)
	key := resume.Key{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID}
	wait := func(ctx context.Context) error {
		if _, err := c.waitForSandbox(ctx, sb); err != nil {
			return err
		}
		return s.health(ctx)
	}
	if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		if !policy.ResumeOnConnect {
			return suspendedError(s.namespace, s.name)
		}
		w := resume.Writer{REST: c.sandboxes}
		id := key.String() + "/" + string(key.UID)
		_, err := wakeGroup.Do(ctx, id, func(ctx context.Context) error {
			if _, err := resumeGroup.Do(ctx, id, func(ctx context.Context) error { return w.SetRunning(ctx, key) }); err != nil {
				return err
			}
			return wait(ctx)
		})
		return err
	}
	// Running (someone else resumed it, or its Pod is being replaced).
	return wait(ctx)
}

// health asks the runtime GET / until it answers (polled: it is starting).
func (s *Sandbox) health(ctx context.Context) error {
	resp, err := s.conn.polling().do(ctx, request{op: "health", method: "GET", endpoint: s.conn.healthEndpoint(), idempotent: true})
	if err != nil {
		return fmt.Errorf("runtime not answering after resume: %w", err)
	}
	drainClose(resp)
	return nil
}

func (s *Sandbox) setPolicy(p sandboxv1beta1.ResumePolicy) {
	s.mu.Lock()
	s.policy = p
	s.mu.Unlock()
}

// began records a call for the activity report (port-forward and base
// URLs only: a router reports what passes through it); the result ends it.
func (s *Sandbox) began() func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.conn.router || s.policy.IdleTimeout <= 0 || s.client == nil || s.closed {
		return func() {}
	}
	if s.reporter == nil {
		w := resume.Writer{REST: s.client.sandboxes}
		s.reporter = &resume.Reporter{
			Write: w.ReportActivity,
			Gone:  resume.IsGone,
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.stopReporting = cancel
		go s.reporter.Run(ctx, time.Second)
	}
	key := resume.Key{Namespace: s.namespace, Name: s.name, UID: s.uid}
	return s.reporter.Begin(key, resume.Interval(s.policy.IdleTimeout, activityReportMax))
}

// polling is c for a runtime that is starting (a Pod is Ready a moment
// before the server in it listens, and a port-forward may look for the
// Pod before it is made again: the Sandbox read before the resume can
// still say Ready): its idempotent calls are tried every 50 to 250 ms for
// about two minutes, or until ctx ends, rather than with the backoff meant
// for a server in trouble, and a Pod not found is one more try.
func (c *conn) polling() *conn {
	p := *c
	p.attempts, p.backoff, p.maxBackoff, p.starting = 600, 50*time.Millisecond, 250*time.Millisecond, true
	return &p
}
