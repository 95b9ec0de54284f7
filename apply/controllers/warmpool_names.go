package controllers

import (
	"math/rand/v2"
	"sync"

	"github.com/agentsandbox/reconciler/render"
)

// maxNameCollisions bounds how often one member's create is tried again
// under a new name after the API server answered AlreadyExists (as the API
// server itself retries a generateName that collided).
const maxNameCollisions = 8

// randomSuffix draws a member name suffix: render.MemberSuffixLength
// characters of render.MemberSuffixAlphabet, as apimachinery's
// names.SimpleNameGenerator draws them. Names identify sandboxes to their
// clients, not secrets: a non-cryptographic source is what generateName
// uses too.
func randomSuffix() string {
	b := make([]byte, render.MemberSuffixLength)
	for i := range b {
		b[i] = render.MemberSuffixAlphabet[rand.IntN(len(render.MemberSuffixAlphabet))] //nolint:gosec // names, not secrets (as generateName)
	}
	return string(b)
}

// suffix draws a member name suffix: r.Suffix's, else randomSuffix.
func (r *WarmPoolReconciler) suffix() string {
	if r.Suffix != nil {
		return r.Suffix()
	}
	return randomSuffix()
}

// suffixes is the suffix source of one reconcile's plans
// (render.WarmPoolPlanInputs.Suffix): the i-th suffix is drawn the first
// time it is asked for and the same afterwards, so the plan made again
// after a policy denial names its members as the first did.
func suffixes(draw func() string) func(int) string {
	var (
		mu    sync.Mutex
		drawn []string
	)
	return func(i int) string {
		mu.Lock()
		defer mu.Unlock()
		for len(drawn) <= i {
			drawn = append(drawn, draw())
		}
		return drawn[i]
	}
}
