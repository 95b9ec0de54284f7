package certs

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var testPolicy = certPolicy{
	hosts: []string{"svc", "svc.ns.svc", "127.0.0.1"}, commonName: "svc.ns.svc",
	validity: 365 * 24 * time.Hour, renewBefore: 30 * 24 * time.Hour,
	promoteAfter: time.Minute, overlap: 24 * time.Hour,
}

// mustPlan runs plan and fails the test on an error.
func mustPlan(t *testing.T, data map[string][]byte, now time.Time, p certPolicy, trusted bool) (map[string][]byte, planAction, string) {
	t.Helper()
	out, action, reason, err := plan(data, now, p, trusted, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out, action, reason
}

func subjects(b []byte) []string {
	var out []string
	for _, c := range parseCerts(b) {
		out = append(out, c.SerialNumber.String())
	}
	return out
}

func TestPlanReplacesWhatCannotBeServed(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good, _, _ := mustPlan(t, nil, t0, testPolicy, true)
	other, _, _ := mustPlan(t, nil, t0, testPolicy, true)
	with := func(k string, v []byte) map[string][]byte {
		d := map[string][]byte{}
		for key, val := range good {
			d[key] = val
		}
		d[k] = v
		return d
	}
	for _, tc := range []struct {
		name   string
		data   map[string][]byte
		now    time.Time
		policy certPolicy
		reason string
	}{
		{"nothing stored", nil, t0, testPolicy, "no certificate"},
		{"key of another certificate", with(keyKey, other[keyKey]), t0, testPolicy, "do not form a pair"},
		{"not signed by the bundle", with(keyCA, other[keyCA]), t0, testPolicy, "not signed by the CA bundle"},
		{"garbage", with(keyCert, []byte("not a certificate")), t0, testPolicy, "do not form a pair"},
		{"expired", good, t0.Add(400 * 24 * time.Hour), testPolicy, "expired"},
		{"missing a host", good, t0, certPolicy{hosts: append(testPolicy.hosts, "extra.example"), commonName: "x",
			validity: testPolicy.validity, renewBefore: testPolicy.renewBefore}, "does not cover extra.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, action, reason := mustPlan(t, tc.data, tc.now, tc.policy, true)
			if action != planIssued || !strings.Contains(reason, tc.reason) {
				t.Fatalf("action %q reason %q, want issued because %q", action, reason, tc.reason)
			}
			if _, err := checkPair(out[keyCert], out[keyKey], parseCerts(out[keyCA]), tc.now, tc.policy.hosts); err != nil {
				t.Errorf("the replacement cannot be served: %v", err)
			}
			if again, action, _ := mustPlan(t, out, tc.now, tc.policy, true); action != planNone || !bytes.Equal(again[keyCert], out[keyCert]) {
				t.Errorf("a second plan did %q", action)
			}
		})
	}
}

func TestPlanRotationOverlaps(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	first, _, _ := mustPlan(t, nil, t0, testPolicy, true)
	oldCA := subjects(first[keyCA])
	if len(oldCA) != 1 {
		t.Fatalf("bundle %v, want one CA", oldCA)
	}
	if _, action, _ := mustPlan(t, first, t0.Add(300*24*time.Hour), testPolicy, true); action != planNone {
		t.Fatalf("65 days before expiry: %q, want nothing", action)
	}

	// Due: the new CA joins the bundle, the old certificate is still served.
	t1 := t0.Add(340 * 24 * time.Hour)
	renewing, action, _ := mustPlan(t, first, t1, testPolicy, true)
	if action != planRenewing || !bytes.Equal(renewing[keyCert], first[keyCert]) || len(renewing[keyNextCert]) == 0 {
		t.Fatalf("renewal: %q, want the old certificate served and a new one waiting", action)
	}
	both := subjects(renewing[keyCA])
	if len(both) != 2 || both[0] != oldCA[0] {
		t.Fatalf("bundle while renewing %v, want the served CA %v first and the new one", both, oldCA)
	}

	// Not promoted before PromoteAfter, nor while the bundle is not injected.
	if _, action, _ := mustPlan(t, renewing, t1.Add(30*time.Second), testPolicy, true); action != planNone {
		t.Fatalf("promoted after 30s: %q", action)
	}
	if _, action, _ := mustPlan(t, renewing, t1.Add(2*time.Minute), testPolicy, false); action != planNone {
		t.Fatalf("promoted with the bundle not injected: %q", action)
	}

	t2 := t1.Add(2 * time.Minute)
	renewed, action, _ := mustPlan(t, renewing, t2, testPolicy, true)
	if action != planRenewed || !bytes.Equal(renewed[keyCert], renewing[keyNextCert]) || len(renewed[keyNextCert]) != 0 {
		t.Fatalf("promotion: %q", action)
	}
	if got := subjects(renewed[keyCA]); len(got) != 2 || got[0] != both[1] || got[1] != oldCA[0] {
		t.Fatalf("bundle after promotion %v, want new CA then old %v", got, both)
	}
	// A replica still serving the old certificate is trusted by the bundle.
	if _, err := checkPair(first[keyCert], first[keyKey], parseCerts(renewed[keyCA]), t2, testPolicy.hosts); err != nil {
		t.Fatalf("the old certificate is no longer trusted: %v", err)
	}

	// The old CA leaves after the overlap.
	pruned, action, _ := mustPlan(t, renewed, t2.Add(25*time.Hour), testPolicy, true)
	if got := subjects(pruned[keyCA]); action != planPruned || len(got) != 1 || got[0] != both[1] {
		t.Fatalf("after the overlap: %q, bundle %v", action, got)
	}
}

func TestNextStep(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	first, _, _ := mustPlan(t, nil, t0, testPolicy, true)
	cert := parseCerts(first[keyCert])[0]
	if got, want := nextStep(first, t0, testPolicy), cert.NotAfter.Add(-testPolicy.renewBefore); !got.Equal(want) {
		t.Errorf("next step %s, want the renewal at %s", got, want)
	}
	renewing, _, _ := mustPlan(t, first, t0.Add(340*24*time.Hour), testPolicy, true)
	next := parseCerts(renewing[keyNextCert])[0]
	if got, want := nextStep(renewing, t0.Add(340*24*time.Hour), testPolicy), issuedAt(next).Add(time.Minute); !got.Equal(want) {
		t.Errorf("next step %s, want the promotion at %s", got, want)
	}
}

// TestPlanKeepsInjectedCAs: a Secret that lost the CA replicas still serve
// under (deleted, or its ca.crt overwritten) is replaced with a bundle
// that still trusts that CA, taken from the injected bundle.
func TestPlanKeepsInjectedCAs(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	good, _, _ := mustPlan(t, nil, t0, testPolicy, true)
	for name, data := range map[string]map[string][]byte{
		"deleted":     nil,
		"CA replaced": {keyCA: []byte("garbage"), keyCert: good[keyCert], keyKey: good[keyKey]},
	} {
		t.Run(name, func(t *testing.T) {
			out, action, _, err := plan(data, t0.Add(time.Hour), testPolicy, true, good[keyCA])
			if err != nil {
				t.Fatal(err)
			}
			if action != planIssued {
				t.Fatalf("action %q, want issued", action)
			}
			if _, err := checkPair(good[keyCert], good[keyKey], parseCerts(out[keyCA]), t0.Add(time.Hour), testPolicy.hosts); err != nil {
				t.Errorf("the certificate replicas still serve is not trusted by the new bundle: %v", err)
			}
			// Once the overlap is over, only the new CA is left.
			later, _, _ := mustPlan(t, out, t0.Add(26*time.Hour), testPolicy, true)
			if n := len(parseCerts(later[keyCA])); n != 1 {
				t.Errorf("%d CAs after the overlap, want 1", n)
			}
		})
	}
}
