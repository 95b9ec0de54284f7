package router

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// prewarmRetry is how long a warm pool member's Pod waits before its
// port-forward connection is dialled again after a dial failed or the
// connection ended while the Pod is still an unclaimed member.
const prewarmRetry = 5 * time.Second

// Results of a prewarm dial (sandbox_router_port_forward_prewarms_total).
const (
	prewarmDialled = "dialled"
	prewarmFailed  = "failed"
)

// Prewarm dials the port-forward connection of a warm pool member's Pod
// (Ready, not yet claimed) before any request needs it, so that the first
// request after a claim takes the member pays no dial through the API
// server. At most the limit given to SetPrewarm are kept so at a time (the
// rest are dialled at their first request, as any other Pod); while one
// waits in the pool its connection has no idle timeout and is dialled
// again if it ends. Nothing is sent on it until a request that passed
// authorization is routed to the Pod. Unwarm ends this.
func (p *PortForward) Prewarm(uid types.UID, namespace, name string) {
	p.mu.Lock()
	if _, warm := p.warm[uid]; warm || len(p.warm) >= p.prewarmMax {
		p.mu.Unlock()
		return
	}
	p.warm[uid] = struct{}{}
	p.pods[uid] = podRef{namespace, name}
	_, dialled := p.conns[uid]
	p.mu.Unlock()
	if !dialled {
		go p.warmUp(uid, podRef{namespace, name})
	}
}

// Unwarm ends Prewarm for a Pod that is no longer an unclaimed member (a
// claim took it, or it is not Ready): its connection, if any, is kept as
// any other Pod's, under the idle timeout.
func (p *PortForward) Unwarm(uid types.UID) {
	p.mu.Lock()
	_, warm := p.warm[uid]
	delete(p.warm, uid)
	f := p.conns[uid]
	p.mu.Unlock()
	if warm && f != nil && p.idleTimeout > 0 {
		f.conn.SetIdleTimeout(p.idleTimeout)
	}
}

// Prewarmed is how many Pods Prewarm keeps connected (or is dialling).
func (p *PortForward) Prewarmed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.warm)
}

// warmUp dials ref's connection while uid is still to be kept warm,
// retrying after prewarmRetry when a dial fails.
func (p *PortForward) warmUp(uid types.UID, ref podRef) {
	for p.isWarm(uid) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := p.forward(ctx, uid, ref)
		cancel()
		if err == nil {
			p.metrics.portForwardPrewarmed(prewarmDialled)
			return
		}
		p.metrics.portForwardPrewarmed(prewarmFailed)
		select {
		case <-p.stop:
			return
		case <-time.After(p.retry):
		}
	}
}

// rewarm is called when uid's connection has ended: a Pod still kept warm
// is dialled again after prewarmRetry.
func (p *PortForward) rewarm(uid types.UID) {
	p.mu.Lock()
	ref, known := p.pods[uid]
	_, warm := p.warm[uid]
	p.mu.Unlock()
	if !warm || !known {
		return
	}
	go func() {
		select {
		case <-p.stop:
		case <-time.After(p.retry):
			p.warmUp(uid, ref)
		}
	}()
}

func (p *PortForward) isWarm(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, warm := p.warm[uid]
	return warm
}
