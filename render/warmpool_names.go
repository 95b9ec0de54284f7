package render

import (
	"hash/fnv"
	"strconv"
)

// Pool members are named as the API server names an object created with
// generateName "<pool>-" (apimachinery's names.SimpleNameGenerator): the
// base cut to MaxGeneratedBase characters, then MemberSuffixLength random
// characters of MemberSuffixAlphabet. A name that stands for a user's
// sandbox is never given to another one: clients treat a name as the
// sandbox's identity, so a stale handle must find "not found", never a
// stranger's sandbox. Render stays pure: the randomness comes in through
// WarmPoolPlanInputs.Suffix.
const (
	// MemberSuffixLength is the length of a member name's random suffix.
	MemberSuffixLength = 5
	// MemberSuffixAlphabet is apimachinery's alphabet for generated names:
	// no vowels (suffixes never spell words) and no characters that read
	// alike (0/o, 1/l).
	MemberSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"
	// MaxGeneratedBase is how much of the base a generated name keeps, so
	// the name fits a DNS label (63 characters): it is also the name of the
	// member's Pod (its hostname) and Service.
	MaxGeneratedBase = 63 - MemberSuffixLength
)

// MemberName is the name of a new member of the pool named pool, given
// its random suffix: "<pool>-" cut to MaxGeneratedBase characters, then
// the suffix.
func MemberName(pool, suffix string) string {
	base := pool + "-"
	if len(base) > MaxGeneratedBase {
		base = base[:MaxGeneratedBase]
	}
	return base + suffix
}

// maxNameTries bounds the suffixes a plan tries per member it creates
// before it gives up on the rest (they are created on a later pass).
const maxNameTries = 8

// SeededSuffixes is a suffix source with no randomness: the i-th suffix is
// derived from seed and i. Tests fix their plans' names with it, and a
// preview (the CLI) shows names like the ones the controller gives.
func SeededSuffixes(seed string) func(int) string {
	return func(i int) string {
		h := fnv.New64a()
		_, _ = h.Write([]byte(seed + "/" + strconv.Itoa(i)))
		return SuffixFrom(h.Sum64())
	}
}

// SuffixFrom spells n in MemberSuffixAlphabet, MemberSuffixLength
// characters long (n modulo 27^5 decides it).
func SuffixFrom(n uint64) string {
	b := make([]byte, MemberSuffixLength)
	for i := range b {
		b[i] = MemberSuffixAlphabet[n%uint64(len(MemberSuffixAlphabet))]
		n /= uint64(len(MemberSuffixAlphabet))
	}
	return string(b)
}
