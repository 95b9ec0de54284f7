package controllers

import (
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/render"
)

func TestRandomSuffixes(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := randomSuffix()
		if len(s) != render.MemberSuffixLength || strings.Trim(s, render.MemberSuffixAlphabet) != "" {
			t.Fatalf("suffix %q is not %d characters of %s", s, render.MemberSuffixLength, render.MemberSuffixAlphabet)
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Errorf("1000 random suffixes gave %d distinct ones", len(seen))
	}
	n := 0
	source := suffixes(func() string { n++; return strings.Repeat(string(render.MemberSuffixAlphabet[n]), 5) })
	if a, b, again := source(0), source(1), source(0); a == b || a != again || n != 2 {
		t.Errorf("a reconcile's source gave %q, %q, then %q for 0 again (%d draws); want one draw per index, the same each time", a, b, again, n)
	}
}
