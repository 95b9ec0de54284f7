package policy

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Mode is what a built-in bundle does in a namespace, after Pod Security
// Admission's modes: enforce refuses, warn lets through with a warning (a
// kubectl warning at admission, a Warning event from the controller), audit
// lets through and records (metrics, audit annotations), off skips the
// bundle.
type Mode string

// Modes of a bundle.
const (
	ModeEnforce Mode = "enforce"
	ModeWarn    Mode = "warn"
	ModeAudit   Mode = "audit"
	ModeOff     Mode = "off"
)

// ModeLabelPrefix starts the namespace label that sets a bundle's mode:
// policy.agents.x-k8s.io/<bundle>=<mode>.
const ModeLabelPrefix = "policy.agents.x-k8s.io/"

// ModeLabel is the namespace label for a bundle's mode.
func ModeLabel(bundle string) string { return ModeLabelPrefix + bundle }

// LegacyOptOutLabel, set to "disabled" on a namespace, keeps the validating
// webhook out of it (its namespaceSelector). Deprecated: set the bundles'
// modes instead; it will be removed in the next release.
const LegacyOptOutLabel = "agents.x-k8s.io/policy-webhook"

// action is the binding action a mode stands for.
func (m Mode) action() Action {
	switch m {
	case ModeWarn:
		return Warn
	case ModeAudit:
		return Audit
	default:
		return Deny
	}
}

// ParseMode reads a mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case ModeEnforce, ModeWarn, ModeAudit, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a policy mode (enforce, warn, audit, off)", s)
}

// Modes are the modes of built-in bundles by name. A bundle not in it is
// off.
type Modes map[string]Mode

// ParseModes reads a comma-separated list of bundle[=mode] (a bare name is
// enforce), e.g. "runtime-isolation,baseline=warn". Bundles not named are
// off. Unknown bundles and modes are errors.
func ParseModes(spec string) (Modes, error) {
	out := Modes{}
	known := Bundles()
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, mode, hasMode := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !contains(known, name) || name == "*" {
			return nil, fmt.Errorf("no built-in policy bundle %q (there are: %s)", name, strings.Join(known, ", "))
		}
		m := ModeEnforce
		if hasMode {
			var err error
			if m, err = ParseMode(mode); err != nil {
				return nil, fmt.Errorf("bundle %s: %w", name, err)
			}
		}
		out[name] = m
	}
	return out, nil
}

// String lists the modes as ParseModes reads them, by bundle name.
func (m Modes) String() string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+string(m[n]))
	}
	return strings.Join(parts, ",")
}

// Of returns a bundle's mode (off when not set).
func (m Modes) Of(bundle string) Mode {
	if v, ok := m[bundle]; ok {
		return v
	}
	return ModeOff
}

// Namespaces decides the modes in force in a namespace: the cluster's
// defaults, overridden per bundle by the namespace's mode labels. Exempt
// namespaces (the controller's own, kube-system) are never blocked: a
// bundle they would enforce warns instead.
type Namespaces struct {
	Defaults Modes
	Exempt   []string
}

// For returns the modes of a namespace with these labels, and a problem
// for each mode label it cannot read. A label with an unknown mode
// enforces its bundle (a typo must not switch a policy off); labels for
// unknown bundles are reported and ignored.
func (n Namespaces) For(namespace string, labels map[string]string) (Modes, []string) {
	out := make(Modes, len(n.Defaults))
	for b, m := range n.Defaults {
		out[b] = m
	}
	var problems []string
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if strings.HasPrefix(k, ModeLabelPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	known := Bundles()
	for _, k := range keys {
		bundle := strings.TrimPrefix(k, ModeLabelPrefix)
		if !contains(known, bundle) || bundle == "*" {
			problems = append(problems, fmt.Sprintf("namespace %s: label %s names no built-in policy bundle (there are: %s)", namespace, k, strings.Join(known, ", ")))
			continue
		}
		m, err := ParseMode(labels[k])
		if err != nil {
			problems = append(problems, fmt.Sprintf("namespace %s: label %s: %v; the bundle is enforced", namespace, k, err))
			m = ModeEnforce
		}
		out[bundle] = m
	}
	if contains(n.Exempt, namespace) && namespace != "*" {
		for b, m := range out {
			if m == ModeEnforce {
				out[b] = ModeWarn
			}
		}
	}
	return out, problems
}

type modesKey struct{}

// WithModes returns a context under which Set checks use these bundle
// modes instead of the set's defaults (for a namespace's objects).
func WithModes(ctx context.Context, m Modes) context.Context {
	return context.WithValue(ctx, modesKey{}, m)
}

// modeOf is the mode of a bundle's policy for a check under ctx: the
// context's modes, else the set's defaults; ok is false when neither says
// (the bindings' own actions apply).
func (s *Set) modeOf(ctx context.Context, bundle string) (Mode, bool) {
	if bundle == "" {
		return "", false
	}
	if m, ok := ctx.Value(modesKey{}).(Modes); ok {
		return m.Of(bundle), true
	}
	if s.defaults != nil {
		return s.defaults.Of(bundle), true
	}
	return "", false
}

// Defaults returns the cluster-wide bundle modes the set was loaded with
// (nil: every loaded bundle acts as its bindings say).
func (s *Set) Defaults() Modes {
	if s == nil {
		return nil
	}
	return s.defaults
}

// Active lists the policies a check under ctx evaluates: all but those of
// bundles that are off.
func (s *Set) Active(ctx context.Context) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, c := range s.policies {
		if m, _ := s.modeOf(ctx, c.bundle); m != ModeOff {
			out = append(out, c.policy.Name)
		}
	}
	return out
}
