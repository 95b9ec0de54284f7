package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func parse(t *testing.T, args ...string) options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("sandbox-router", flag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestDefaultsAreValid(t *testing.T) {
	t.Setenv("CLUSTER_DOMAIN", "")
	t.Setenv("PROXY_TIMEOUT_SECONDS", "")
	o := parse(t)
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.httpAddr != ":8080" || o.proxyTimeout != 180*time.Second || o.transport != "direct" || o.auth != "none" || o.clusterDomain != "cluster.local" ||
		o.resumeTimeout != 2*time.Minute || o.activityMax != 30*time.Second {
		t.Errorf("defaults: %+v", o)
	}
}

func TestUpstreamEnvironment(t *testing.T) {
	t.Setenv("CLUSTER_DOMAIN", "corp.example")
	t.Setenv("PROXY_TIMEOUT_SECONDS", "2.5")
	if o := parse(t); o.clusterDomain != "corp.example" || o.proxyTimeout != 2500*time.Millisecond {
		t.Errorf("from the environment: --cluster-domain=%s --proxy-timeout=%s", o.clusterDomain, o.proxyTimeout)
	}
}

func TestInvalidFlags(t *testing.T) {
	o := parse(t, "--transport=tunnel", "--auth=basic", "--namespaces=ok,Not_OK", "--max-timeout=1s", "--resolve-wait=-1s", "--max-header-bytes=10",
		"--resume-timeout=0s", "--activity-interval=-1s")
	err := o.validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"--transport", "--auth", `"Not_OK"`, "--max-timeout=1s is shorter", "--resolve-wait", "--max-header-bytes", "--resume-timeout", "--activity-interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no complaint about %s in:\n%v", want, err)
		}
	}
}

func TestAllowedHostsFlag(t *testing.T) {
	o := parse(t, "--allowed-hosts=localhost, sandbox.test")
	if err := o.validate(); err != nil {
		t.Errorf("valid names: %v", err)
	}
	o = parse(t, "--allowed-hosts=http://attacker.example")
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--allowed-hosts") {
		t.Errorf("a URL as a host name: %v", err)
	}
}
