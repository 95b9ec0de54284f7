package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentsandbox/reconciler/dataplane/client"
)

// sandboxFlags are the flags of the commands that reach into a sandbox
// (exec, cp) through the Go SDK.
type sandboxFlags struct {
	namespace, kubeconfig, context string
	router, routerToken            string
	port                           int
	readyTimeout                   time.Duration
	sandboxd                       bool
}

func (f *sandboxFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.namespace, "n", "", "namespace of the claim or sandbox (default: the kubeconfig context's, else default)")
	fs.StringVar(&f.namespace, "namespace", "", "same as -n")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context")
	fs.StringVar(&f.router, "router", "", "sandbox router URL (e.g. http://localhost:8080); default: straight to the sandbox's Pod by the API server's port-forward")
	fs.StringVar(&f.routerToken, "router-token", "", "bearer token for the router (one with TokenReview authentication)")
	fs.IntVar(&f.port, "port", client.DefaultPort, "the runtime's port in the Pod")
	fs.BoolVar(&f.sandboxd, "sandboxd", false, "speak sandboxd (upstream's standard runtime API: REST on the Pod's port 8080, gRPC on 9090) instead of the legacy protocol; straight to the Pod by port-forward")
	fs.DurationVar(&f.readyTimeout, "ready-timeout", 3*time.Minute, "how long to wait for a claim's sandbox to be ready and answering")
}

// openSandbox connects to the claim or Sandbox name with the Go SDK (a
// variable so tests can connect to a fake runtime instead).
var openSandbox = func(ctx context.Context, f *sandboxFlags, name string) (*client.Sandbox, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, &inputError{fmt.Sprintf("no cluster: %v", err)}
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, err
		}
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

// parseInterleaved parses flags placed before, between and after the
// positional arguments, which it returns; everything after "--" is
// positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos, rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
