package main

import "testing"

// TestE2BFlags: --e2b is off by default; its auth follows --auth unless
// given; bad values are refused.
func TestE2BFlags(t *testing.T) {
	if o := parse(t); o.e2b.enabled {
		t.Error("--e2b is on by default")
	}
	o := parse(t, "--e2b", "--auth=none")
	if err := o.validate(); err != nil || o.e2b.auth != "none" {
		t.Errorf("--e2b --auth=none: %v, e2b auth %q", err, o.e2b.auth)
	}
	o = parse(t, "--e2b")
	if err := o.validate(); err != nil || o.e2b.auth != "tokenreview" || o.e2b.envd == "" {
		t.Errorf("--e2b: %v, e2b auth %q envd %q", err, o.e2b.auth, o.e2b.envd)
	}
	for _, bad := range [][]string{
		{"--e2b", "--e2b-auth=open"},
		{"--e2b", "--e2b-namespace=Not_A_Namespace"},
		{"--e2b", "--e2b-envd-version=v1"},
		{"--e2b", "--e2b-ready-timeout=0s"},
		{"--e2b", "--e2b-auth=none", "--e2b-api-key-namespace=keys"},
		{"--e2b", "--e2b-api-key-namespace=Keys!"},
	} {
		o := parse(t, bad...)
		if err := o.validate(); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
