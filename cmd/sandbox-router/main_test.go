package main

import (
	"flag"
	"os"
	"path/filepath"
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
	if o.httpAddr != ":8080" || o.proxyTimeout != 180*time.Second || o.transport != "direct" || o.clusterDomain != "cluster.local" ||
		o.resumeTimeout != 2*time.Minute || o.activityMax != 30*time.Second {
		t.Errorf("defaults: %+v", o)
	}
}

// TestDefaultsAreSafe: the binary on its own, without the deploy bundle's
// flags, authenticates and authorizes callers, caps request bodies, caches
// refusals, budgets its reviews, and does not fall back to DNS or allow
// local addresses.
func TestDefaultsAreSafe(t *testing.T) {
	o := parse(t)
	if o.auth != "tokenreview" {
		t.Errorf("--auth defaults to %q, want tokenreview", o.auth)
	}
	if o.maxBody <= 0 || o.maxBody > 1<<30 {
		t.Errorf("--max-request-body-bytes defaults to %d, want a cap", o.maxBody)
	}
	if o.authRefusal <= 0 || o.authNewQPS <= 0 || o.authNewBurst <= 0 {
		t.Errorf("refusal cache %s, new-token budget %v/%d: want all set", o.authRefusal, o.authNewQPS, o.authNewBurst)
	}
	if o.dnsFallback || o.allowLocal || o.runtimeTokenFile != "" {
		t.Errorf("--dns-fallback=%t --allow-local-addresses=%t --runtime-token-file=%q by default", o.dnsFallback, o.allowLocal, o.runtimeTokenFile)
	}
}

func TestReadRuntimeToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := readRuntimeToken(""); tok != "" || err != nil {
		t.Errorf("no file: %q, %v", tok, err)
	}
	if tok, err := readRuntimeToken(write("secret", "s3cret\n")); tok != "s3cret" || err != nil {
		t.Errorf("a secret with a trailing newline: %q, %v", tok, err)
	}
	for name, content := range map[string]string{"empty": " \n", "two-lines": "a\nb"} {
		if _, err := readRuntimeToken(write(name, content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := readRuntimeToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: accepted")
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

// TestDNSFallbackOnlyWithoutAuth plays mallory, who may exec into the
// Sandboxes of her own namespace and asks for one that does not exist
// with another tenant's pod IP: with --dns-fallback, the router would
// check her access to the name and send the request to that address. A
// router that authorizes callers refuses to start with it; upstream's
// behaviour stays for a router without auth.
func TestDNSFallbackOnlyWithoutAuth(t *testing.T) {
	o := parse(t, "--dns-fallback")
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--dns-fallback with --auth=tokenreview") {
		t.Errorf("--dns-fallback with the default --auth=tokenreview: %v", err)
	}
	o = parse(t, "--dns-fallback", "--auth=none")
	if err := o.validate(); err != nil {
		t.Errorf("--dns-fallback --auth=none: %v", err)
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
