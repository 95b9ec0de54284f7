package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/agentsandbox/reconciler/dataplane/client"
)

// sandboxFlags are the flags of the commands that reach into a sandbox
// (exec, cp) through the Go SDK; kubectl's flags choose the cluster.
type sandboxFlags struct {
	// namespace is -n; empty: the kubeconfig context's, else default.
	namespace           string
	kube                genericclioptions.RESTClientGetter
	router, routerToken string
	port                int
	readyTimeout        time.Duration
	sandboxd            bool
}

func (f *sandboxFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.router, "router", "", "sandbox router URL (e.g. http://localhost:8080); default: straight to the sandbox's Pod by the API server's port-forward")
	fs.StringVar(&f.routerToken, "router-token", "", "bearer token for the router (one with TokenReview authentication)")
	fs.IntVar(&f.port, "port", client.DefaultPort, "the runtime's port in the Pod")
	fs.BoolVar(&f.sandboxd, "sandboxd", false, "speak sandboxd (upstream's standard runtime API: REST on the Pod's port 8080, gRPC on 9090) instead of the legacy protocol; straight to the Pod by port-forward")
	fs.DurationVar(&f.readyTimeout, "ready-timeout", 3*time.Minute, "how long to wait for a claim's sandbox to be ready and answering")
}

// resolve takes kubectl's flags as parsed.
func (f *sandboxFlags) resolve(a *app) {
	f.namespace, f.kube = *a.kube.Namespace, a.kube
}

// openSandbox connects to the claim or Sandbox name with the Go SDK (a
// variable so tests can connect to a fake runtime instead).
var openSandbox = func(ctx context.Context, f *sandboxFlags, name string) (*client.Sandbox, error) {
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return nil, &inputError{fmt.Sprintf("no cluster: %v", err)}
	}
	ns, err := f.ns()
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithPort(f.port), client.WithReadyTimeout(f.readyTimeout)}
	switch {
	case f.sandboxd:
		opts = append(opts, client.WithSandboxd())
	case f.router != "":
		opts = append(opts, client.WithRouter(f.router), client.WithBearerToken(f.routerToken))
	}
	c, err := client.New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return c.Open(ctx, ns, name)
}

// ns is -n, else the kubeconfig context's namespace, else default.
func (f *sandboxFlags) ns() (string, error) {
	if f.namespace != "" {
		return f.namespace, nil
	}
	ns, _, err := f.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", &inputError{fmt.Sprintf("no namespace: %v", err)}
	}
	return ns, nil
}
