package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/agentsandbox/reconciler/tests/otlpsink"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "Address to receive OTLP/HTTP traces on (POST /v1/traces).")
	quiet := flag.Duration("quiet", 2*time.Second, "Print the traces received once none arrived for this long.")
	flag.Parse()
	sink := &otlpsink.Sink{}
	go func() {
		for range time.Tick(*quiet / 2) {
			if spans := sink.Take(*quiet); len(spans) > 0 {
				fmt.Print(otlpsink.Tree(spans))
			}
		}
	}()
	srv := &http.Server{Addr: *listen, Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "otlp-sink: receiving OTLP/HTTP traces on http://%s/v1/traces\n", *listen)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "otlp-sink:", err)
		os.Exit(1)
	}
}
