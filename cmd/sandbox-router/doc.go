// Command sandbox-router is the data plane's front door: it proxies
// requests to sandbox Pods by upstream's X-Sandbox-* headers (see package
// dataplane/router). It is flags and wiring only: the cache, the resolver,
// the transports (direct or port-forward), authentication, resume on
// connect, the servers and the metrics live in dataplane/router, and the
// Sandbox writes and activity reporter in dataplane/resume.
package main
