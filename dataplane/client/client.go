package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// ClaimGenerateName is the generateName of the claims Create makes, as
// upstream's SDKs make them.
const ClaimGenerateName = "sandbox-claim-"

// Client creates and opens sandboxes in one cluster.
type Client struct {
	cfg        *rest.Config
	sandboxes  *rest.RESTClient // agents.x-k8s.io/v1beta1
	extensions *rest.RESTClient // extensions.agents.x-k8s.io/v1beta1
	core       *rest.RESTClient // v1, for pods/portforward
	opts       []Option

	// probes are the routers' answers on the checks they make, by URL
	// (routerChecks).
	probesMu sync.Mutex
	probes   map[string]*routerProbe
}

var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	// corev1: the Pods a port-forward follows (their watch events are
	// decoded by type).
	for _, add := range []func(*runtime.Scheme) error{sandboxv1beta1.AddToScheme, extv1beta1.AddToScheme, corev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s)
}()

// New returns a Client for the cluster cfg reaches (for example from
// clientcmd, or rest.InClusterConfig). The options apply to every Sandbox
// it makes; Create, Open and Dial take options that override them.
//
// Client-side rate limiting is as controller-runtime's GetConfig sets it:
// a cfg that leaves QPS unset (0, and no RateLimiter) gets none, and the
// API server's priority and fairness does the limiting (client-go would
// otherwise hold each of the Client's API clients to 5 requests a second,
// burst 10: measured on the local cluster, 100 Creates at once took 30 s
// instead of 3, and claims paced 5 a second 2.7 s instead of 0.09 s at
// p99); a positive QPS (Burst 0: 10) or a RateLimiter is one budget that
// the Client's requests share, whichever API group they go to.
func New(cfg *rest.Config, opts ...Option) (*Client, error) {
	if cfg == nil {
		return nil, errors.New("client: no rest.Config")
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "agent-sandbox-client-go"
	}
	rateLimit(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	rc := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &gv, apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		return rest.RESTClientForConfigAndClient(c, hc)
	}
	c := &Client{cfg: cfg, opts: opts}
	if c.sandboxes, err = rc(sandboxv1beta1.GroupVersion, "/apis"); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if c.extensions, err = rc(extv1beta1.GroupVersion, "/apis"); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if c.core, err = rc(schema.GroupVersion{Version: "v1"}, "/api"); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}

// rateLimit sets cfg's client-side rate limiting as New documents it.
func rateLimit(cfg *rest.Config) {
	switch {
	case cfg.RateLimiter != nil:
	case cfg.QPS == 0:
		cfg.QPS = -1
	case cfg.QPS > 0:
		burst := cfg.Burst
		if burst <= 0 {
			burst = rest.DefaultBurst
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	}
}

func (c *Client) options(opts []Option) options {
	o := defaultOptions()
	for _, f := range append(append([]Option{}, c.opts...), opts...) {
		f(&o)
	}
	return o
}

// readyContext bounds ctx by the ready timeout.
func (o *options) readyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.readyTimeout > 0 {
		return context.WithTimeout(ctx, o.readyTimeout)
	}
	return context.WithCancel(ctx)
}

// Create claims a sandbox from the SandboxWarmPool warmPool in namespace (a
// ready one when the pool has one, otherwise the controller starts one from
// the pool's template) and returns it once it is Ready and its runtime
// answers. It makes a SandboxClaim (generateName "sandbox-claim-", the
// agents.x-k8s.io/client-first-requested-at annotation; its name made here
// as the API server would make it), watches it from the version the create
// returned until status.sandbox.name is set and then the Sandbox until
// Ready=True (one watch each; through a router that checks claims, the
// Sandbox is neither watched nor read: openByClaim), and connects.
// Through a router that routes by claim, nothing is watched (unless
// WithClaimReady): one request naming only the claim waits in the router
// until the claim controls a routable Sandbox, which the router's answer
// names (openRouted; the claim is watched as above only if that fails,
// e.g. after the router's --claim-wait). If
// any of this fails, or ctx ends or the ready timeout passes first
// (ErrTimeout), the claim is deleted.
//
// Close deletes the claim, and with it the Sandbox.
func (c *Client) Create(ctx context.Context, namespace, warmPool string, opts ...Option) (_ *Sandbox, err error) {
	o := c.options(opts)
	ctx, span := tracer().Start(ctx, "sandbox.create_claim")
	defer func() { endSpan(span, nil, err) }()
	requested := time.Now().UTC().Format(time.RFC3339Nano)
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ClaimGenerateName,
			Namespace:    namespace,
			Annotations:  map[string]string{extv1beta1.AnnotationClientFirstRequestedAt: requested},
		},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: warmPool}},
	}
	if tc := traceContextJSON(ctx); tc != "" { // the controller continues this trace
		claim.Annotations[sandboxv1beta1.AnnotationTraceContext] = tc
	}
	wctx, cancel := o.readyContext(ctx)
	defer cancel()
	probe := c.routerChecks(&o)
	created, err := c.createClaim(wctx, claim)
	if err != nil {
		return nil, fmt.Errorf("creating a claim on warm pool %s/%s: %w", namespace, warmPool, err)
	}
	o.seenReady = true
	var sb *Sandbox
	if !o.claimReady && probe.routesClaims(wctx) {
		if sb, err = c.openRouted(wctx, &o, created); err != nil && wctx.Err() != nil {
			err = c.routedTimeout(ctx, created, err)
		}
	}
	if sb == nil && wctx.Err() == nil {
		sb, err = c.openClaim(wctx, &o, created, probe)
	}
	if err != nil {
		// The claim is ours and useless: remove it even though ctx may be over.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer dcancel()
		if derr := c.deleteClaim(dctx, namespace, created.Name); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting claim %s/%s: %w", namespace, created.Name, derr))
		}
		return nil, err
	}
	sb.ownsClaim = true
	return sb, nil
}

// claimNameAttempts is how many names createClaim tries: a name made of
// five random characters is taken by another claim of the namespace once
// in millions.
const claimNameAttempts = 3

// claimSuffix makes the random part of a claim's name.
var claimSuffix = func() string { return utilrand.String(5) }

// createClaim creates claim under a name made from ClaimGenerateName (five
// random characters, as the API server makes one; generateName stays set,
// as upstream's SDKs leave it) and returns the claim created. A name taken
// already is made again. The claim's watch is opened after the create,
// from the version it returned (openClaim): opened with the create, 50
// watches took a burst of 50 creates from 43-53 ms to 60-178 ms at p50 on
// the local cluster (docs/bench/2026-11-29/claim-watch-with-create.txt).
func (c *Client) createClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) (*extv1beta1.SandboxClaim, error) {
	for attempt := 1; ; attempt++ {
		claim.Name = ClaimGenerateName + claimSuffix()
		created := &extv1beta1.SandboxClaim{}
		err := c.extensions.Post().Namespace(claim.Namespace).Resource("sandboxclaims").Body(claim).Do(ctx).Into(created)
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) || attempt == claimNameAttempts {
			return nil, err
		}
	}
}

// Open connects to an existing sandbox: name is a SandboxClaim (its bound
// Sandbox is used, waiting for it as Create does) or else a Sandbox.
// Close on a Sandbox from Open only disconnects: the claim and the Sandbox
// are left as they are.
func (c *Client) Open(ctx context.Context, namespace, name string, opts ...Option) (*Sandbox, error) {
	o := c.options(opts)
	ctx, cancel := o.readyContext(ctx)
	defer cancel()
	probe := c.routerChecks(&o)
	claim := &extv1beta1.SandboxClaim{}
	err := c.extensions.Get().Namespace(namespace).Resource("sandboxclaims").Name(name).Do(ctx).Into(claim)
	if err == nil {
		return c.openClaim(ctx, &o, claim, probe)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("getting claim %s/%s: %w", namespace, name, waitError(ctx, err))
	}
	sb := &sandboxv1beta1.Sandbox{}
	err = c.sandboxes.Get().Namespace(namespace).Resource("sandboxes").Name(name).Do(ctx).Into(sb)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no SandboxClaim or Sandbox %s in namespace %s: %w", name, namespace, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("getting sandbox %s/%s: %w", namespace, name, waitError(ctx, err))
	}
	claimName := ""
	if ref := extv1beta1.ClaimOf(sb); ref != nil {
		claimName = ref.Name
	}
	return c.openSandbox(ctx, &o, sb, claimName)
}

// openClaim waits for claim to be bound (one watch on its name, from its
// version) and opens its Sandbox: by claim when probe says the router
// checks claims (openByClaim), else read and checked here.
func (c *Client) openClaim(ctx context.Context, o *options, claim *extv1beta1.SandboxClaim, probe *routerProbe) (*Sandbox, error) {
	wctx, span := tracer().Start(ctx, "sandbox.wait_bound")
	bound, err := c.waitForClaim(wctx, claim)
	endSpan(span, nil, err)
	if err != nil {
		return nil, err
	}
	if s, ok, err := c.openByClaim(ctx, o, bound, probe); ok {
		return s, err
	}
	sb := &sandboxv1beta1.Sandbox{}
	name := bound.Status.Sandbox.Name
	gctx, span := tracer().Start(ctx, "sandbox.get_sandbox")
	err = c.sandboxes.Get().Namespace(claim.Namespace).Resource("sandboxes").Name(name).Do(gctx).Into(sb)
	endSpan(span, nil, err)
	if err != nil {
		if apierrors.IsNotFound(err) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("sandbox %s/%s of claim %s: %w", claim.Namespace, name, claim.Name, waitError(ctx, err))
	}
	// The name in the claim's status is not proof: a Sandbox of that name
	// that the claim does not control (API group, kind, name and UID) is
	// someone else's, made after the claim's own was gone.
	if !extv1beta1.IsClaimedBy(sb, bound) {
		return nil, fmt.Errorf("sandbox %s/%s is not controlled by claim %s: %w", claim.Namespace, name, claim.Name, ErrNotFound)
	}
	return c.openSandbox(ctx, o, sb, claim.Name)
}

func (c *Client) openSandbox(ctx context.Context, o *options, sb *sandboxv1beta1.Sandbox, claimName string) (*Sandbox, error) {
	policy, _ := sandboxv1beta1.ResumePolicyOf(sb.Annotations)
	if sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended {
		if !policy.ResumeOnConnect {
			return nil, suspendedError(sb.Namespace, sb.Name)
		}
		// Opening is a connection: resume it (once for all who ask).
		key := resume.Key{Namespace: sb.Namespace, Name: sb.Name, UID: sb.UID}
		w := resume.Writer{REST: c.sandboxes}
		if _, err := resumeGroup.Do(ctx, key.String()+"/"+string(key.UID), func(ctx context.Context) error {
			return w.SetRunning(ctx, key)
		}); err != nil {
			return nil, err
		}
		resumed := *o
		resumed.starting = true
		o = &resumed
	}
	wctx, span := tracer().Start(ctx, "sandbox.wait_ready")
	ready, err := c.waitForSandbox(wctx, sb)
	endSpan(span, nil, err)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{
		namespace: ready.Namespace, name: ready.Name, claimName: claimName, podName: ready.Name,
		podIPs: ready.Status.PodIPs, client: c, uid: ready.UID,
	}
	s.policy, _ = sandboxv1beta1.ResumePolicyOf(ready.Annotations)
	if p := ready.Annotations[sandboxv1beta1.AnnotationPodName]; p != "" {
		s.podName = p
	}
	if err := s.connect(ctx, o); err != nil {
		return nil, err
	}
	return s, nil
}

// Dial connects to the Sandbox name in namespace through a router or a
// base URL, without asking the API server anything (so the options must
// include WithRouter or WithBaseURL). Close only disconnects.
func Dial(ctx context.Context, namespace, name string, opts ...Option) (*Sandbox, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if o.strategy == viaPortForward || o.strategy == viaSandboxd {
		return nil, errors.New("client: Dial needs WithRouter or WithBaseURL; port-forward (sandboxd included) needs a Client (New)")
	}
	ctx, cancel := o.readyContext(ctx)
	defer cancel()
	s := &Sandbox{namespace: namespace, name: name, podName: name}
	if err := s.connect(ctx, &o); err != nil {
		return nil, err
	}
	return s, nil
}

func (c *Client) deleteClaim(ctx context.Context, namespace, name string) error {
	bg := metav1.DeletePropagationBackground
	err := c.extensions.Delete().Namespace(namespace).Resource("sandboxclaims").Name(name).
		Body(&metav1.DeleteOptions{PropagationPolicy: &bg}).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// noRedirects keeps a sandbox's answer from sending the client elsewhere.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
