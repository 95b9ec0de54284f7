package e2b

import (
	"net/url"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestIDRoundTrip(t *testing.T) {
	for _, ns := range []string{"default", "a", "team--x", strings.Repeat("n", 63)} {
		suffix, err := newSuffix()
		if err != nil {
			t.Fatal(err)
		}
		id, err := SandboxID(ns, claimPrefix+suffix)
		if err != nil {
			t.Fatalf("SandboxID(%s): %v", ns, err)
		}
		gotNS, gotName, err := ParseID(id)
		if err != nil || gotNS != ns || gotName != claimPrefix+suffix {
			t.Errorf("ParseID(%q) = %q, %q, %v; want %q, %q", id, gotNS, gotName, err, ns, claimPrefix+suffix)
		}
	}
}

// TestForgedIDs: nothing but what SandboxID makes is accepted, so no ID
// can reach an object of another shape (a path, another claim, another
// namespace spelled oddly).
func TestForgedIDs(t *testing.T) {
	for _, id := range []string{
		"", "--abcdefghijkl", "default--", "default--abcdefghijk", "default--abcdefghijklm",
		"default--ABCDEFGHIJKL", "default--abcdefghijk-", "default-abcdefghijkl", "default--abc/../efghij",
		"../default--abcdefghijkl", "default/x--abcdefghijkl", "Default--abcdefghijkl", "-default--abcdefghijkl",
		"default.svc--abcdefghijkl", "default--abcdefghijkl\n", " default--abcdefghijkl", "default--abcdefghij%2F",
		strings.Repeat("n", 64) + "--abcdefghijkl",
	} {
		if ns, name, err := ParseID(id); err == nil {
			t.Errorf("ParseID(%q) accepted: %q %q", id, ns, name)
		}
	}
	if _, err := SandboxID("default", "my-claim"); err == nil {
		t.Error("SandboxID accepted a claim this package did not name")
	}
}

func TestTokens(t *testing.T) {
	tok, err := RandomTokens()
	if err != nil {
		t.Fatal(err)
	}
	a := tok.For("ns", "e2b-abcdefghijkl", "uid-1")
	if tok.Check("ns", "e2b-abcdefghijkl", "uid-1", a) != nil {
		t.Error("a token was refused for its own claim")
	}
	for _, c := range []struct{ ns, name, uid, token string }{
		{"ns", "e2b-abcdefghijkl", "uid-2", a}, // the claim made again: another UID
		{"ns2", "e2b-abcdefghijkl", "uid-1", a},
		{"ns", "e2b-abcdefghijkm", "uid-1", a},
		{"ns", "e2b-abcdefghijkl", "uid-1", ""},
		{"ns", "e2b-abcdefghijkl", "", tok.For("ns", "e2b-abcdefghijkl", "")},
	} {
		if tok.Check(c.ns, c.name, toUID(c.uid), c.token) == nil {
			t.Errorf("token accepted for %+v", c)
		}
	}
	other, _ := RandomTokens()
	if other.Check("ns", "e2b-abcdefghijkl", "uid-1", a) == nil {
		t.Error("a token made under another key was accepted")
	}
	if _, err := NewTokens([]byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
}

func TestParseListQuery(t *testing.T) {
	// As the SDK sends {user: 'a b', 'k=1': 'x&y'}: pairs URI-encoded,
	// joined as a form, and the whole encoded once more by the URL.
	q, err := url.ParseQuery("metadata=user%3Da%252520b%26k%25253D1%3Dx%252526y&state=running,paused&limit=5&nextToken=abc")
	if err != nil {
		t.Fatal(err)
	}
	lq, e := parseListQuery(q)
	if e != nil {
		t.Fatal(e)
	}
	if lq.metadata["user"] != "a b" || lq.metadata["k=1"] != "x&y" || len(lq.metadata) != 2 {
		t.Errorf("metadata = %q", lq.metadata)
	}
	if strings.Join(lq.states, ",") != "running,paused" || lq.limit != 5 || lq.nextToken != "abc" {
		t.Errorf("query = %+v", lq)
	}
	for _, bad := range []string{"state=dead", "limit=0", "limit=100000", "limit=x", "metadata=a%3D%25zz"} {
		q, _ := url.ParseQuery(bad)
		if _, e := parseListQuery(q); e == nil || e.Code != 400 {
			t.Errorf("%s: want 400, got %v", bad, e)
		}
	}
}

func TestNamespaceOf(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:team-a:agent": "team-a",
		"system:serviceaccount:Bad_NS:agent": "fallback",
		"system:serviceaccount:":             "fallback",
		"alice":                              "fallback",
	} {
		if got := namespaceOf(&authenticationv1.UserInfo{Username: user}, "fallback"); got != want {
			t.Errorf("namespaceOf(%q) = %q, want %q", user, got, want)
		}
	}
}

func toUID(s string) types.UID { return types.UID(s) }
