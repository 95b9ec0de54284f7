package client_test

import (
	"context"
	"fmt"
	"log"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentsandbox/reconciler/dataplane/client"
)

// Claim a sandbox from make run's sample pool, run a command in it, and
// throw it away.
func Example() {
	ctx := context.Background()
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, else ~/.kube/config
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cfg) // straight to the sandbox's Pod by port-forward; or client.WithRouter(url)
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, "default", "python-pool")
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.Run(ctx, "echo hi")
	if cerr := sb.Close(ctx); cerr != nil { // deletes the claim, and with it the sandbox
		log.Print(cerr)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}
