package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/tracing"
)

func main() {
	namespace := flag.String("namespace", "default", "namespace of the warm pool")
	pool := flag.String("pool", "python-pool", "SandboxWarmPool to claim from")
	router := flag.String("router", "", "sandbox router URL (default: port-forward to the sandbox's Pod)")
	flag.Parse()
	command := "echo hi"
	if flag.NArg() > 0 {
		command = strings.Join(flag.Args(), " ")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// With OTEL_EXPORTER_OTLP_ENDPOINT set, the whole run is one trace.
	stopTracing, _, err := tracing.Setup(ctx, tracing.Options{Service: "hello"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, span := otel.Tracer("hello").Start(ctx, "hello")
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		log.Fatal(err)
	}
	var opts []client.Option
	if *router != "" {
		opts = append(opts, client.WithRouter(*router))
	}
	c, err := client.New(cfg, opts...)
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.Create(ctx, *namespace, *pool)
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.Run(ctx, command)
	if cerr := sb.Close(ctx); cerr != nil {
		log.Print(cerr)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	fmt.Fprint(os.Stderr, res.Stderr)
	span.End()
	tracing.Shutdown(stopTracing, func(err error) { log.Print(err) })
	os.Exit(res.ExitCode)
}
