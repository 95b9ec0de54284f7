package metrics

import (
	"cmp"
	"slices"
	"sync"
	"unicode/utf8"
)

// Label values that come from user input (namespaces, template names,
// launch types, owner kinds, policy names) are bounded, so that objects
// with ever new values cannot grow the controller's memory and the
// scraper's series without limit: a value is cut at MaxLabelValueLength
// bytes, and past a label's cap of distinct values the rest count as
// Other.
const (
	MaxLabelValueLength = 100
	Other               = "other"
)

// Caps of distinct values per label.
const (
	maxNamespaces = 200
	maxTemplates  = 100
	maxPolicies   = 100
	maxRules      = 100
	maxKinds      = 20
)

// boundedLabel admits the first max distinct values of one label of
// counters and histograms (whose series live as long as the process); later
// values count as Other.
type boundedLabel struct {
	max    int
	mu     sync.Mutex
	values map[string]struct{}
}

func newBoundedLabel(maxValues int) *boundedLabel {
	return &boundedLabel{max: maxValues, values: map[string]struct{}{}}
}

// value is v as the label may carry it. none is always admitted.
func (b *boundedLabel) value(v string) string {
	v = truncate(v)
	if v == none {
		return v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.values[v]; ok {
		return v
	}
	if len(b.values) >= b.max {
		return Other
	}
	b.values[v] = struct{}{}
	return v
}

// reset forgets the admitted values (for a gauge that is reset).
func (b *boundedLabel) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.values)
}

// truncate cuts v to MaxLabelValueLength bytes on a rune boundary.
func truncate(v string) string {
	if len(v) <= MaxLabelValueLength {
		return v
	}
	cut := MaxLabelValueLength
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}

// topValues returns, for a label of a gauge computed at scrape time, the
// values that keep their own series: the maxValues with the most objects
// (ties by name, so the choice is stable); the others count as Other.
func topValues(counts map[string]int, maxValues int) map[string]bool {
	keep := map[string]bool{}
	if len(counts) <= maxValues {
		for v := range counts {
			keep[v] = true
		}
		return keep
	}
	type vc struct {
		v string
		n int
	}
	all := make([]vc, 0, len(counts))
	for v, n := range counts {
		all = append(all, vc{v, n})
	}
	slices.SortFunc(all, func(a, b vc) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.v, b.v))
	})
	for _, x := range all[:maxValues] {
		keep[x.v] = true
	}
	return keep
}

// knownOr maps a value outside a fixed set to Other.
func knownOr(v string, known ...string) string {
	if slices.Contains(known, v) {
		return v
	}
	return Other
}
