package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/agentsandbox/reconciler/tests"
)

// keywords are PromQL words that are neither functions nor metrics.
var keywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
}

var (
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// grouping is a clause whose parenthesized list holds label names.
	grouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(`)
)

// MetricNames returns the metric names a PromQL expression selects, sorted.
func MetricNames(expr string) ([]string, error) {
	s, err := strip(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		start, end := loc[0], loc[1]
		name := s[start:end]
		if start > 0 && (isDigit(s[start-1]) || s[start-1] == '.' || s[start-1] == '$') {
			continue // a number's exponent or unit (5e3, 1h) or a variable
		}
		if keywords[strings.ToLower(name)] {
			continue
		}
		rest := strings.TrimLeft(s[end:], " \t\n")
		if strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		seen[name] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// strip blanks what cannot hold a metric name: string literals, label
// matchers {...}, ranges and subqueries [...], and the label lists of
// grouping clauses.
func strip(expr string) (string, error) {
	b := []byte(expr)
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			b[i] = ' '
		}
	}
	// Strings first: they may hold any bracket.
	for i := 0; i < len(b); i++ {
		if q := b[i]; q == '"' || q == '\'' || q == '`' {
			j := i + 1
			for ; j < len(b) && b[j] != q; j++ {
				if b[j] == '\\' && q != '`' {
					j++
				}
			}
			if j >= len(b) {
				return "", fmt.Errorf("unterminated string in %q", expr)
			}
			blank(i, j+1)
			i = j
		}
	}
	for _, pair := range [][2]byte{{'{', '}'}, {'[', ']'}} {
		for i := 0; i < len(b); i++ {
			if b[i] != pair[0] {
				continue
			}
			j := i + 1
			for ; j < len(b) && b[j] != pair[1]; j++ {
			}
			if j >= len(b) {
				return "", fmt.Errorf("unbalanced %c in %q", pair[0], expr)
			}
			blank(i, j+1)
			i = j
		}
	}
	s := string(b)
	for {
		loc := grouping.FindStringIndex(s)
		if loc == nil {
			return s, nil
		}
		end := strings.IndexByte(s[loc[1]:], ')')
		if end < 0 {
			return "", fmt.Errorf("unbalanced ( in %q", expr)
		}
		s = s[:loc[0]] + strings.Repeat(" ", loc[1]+end+1-loc[0]) + s[loc[1]+end+1:]
	}
}

// Use is one PromQL expression of the dashboard or the alerts.
type Use struct {
	// Where names it: "panel <title>" or "alert <name>".
	Where string
	Expr  string
}

// Dir returns config/monitoring.
func Dir() string { return filepath.Join(tests.RepoRoot(), "config", "monitoring") }

// Uses returns every expression of the dashboard's panels and of the alerts.
func Uses() ([]Use, error) {
	var uses []Use
	raw, err := os.ReadFile(filepath.Join(Dir(), "dashboard.json"))
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("dashboard.json: %w", err)
	}
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			uses = append(uses, Use{Where: "panel " + p.Title, Expr: t.Expr})
		}
	}
	raw, err = os.ReadFile(filepath.Join(Dir(), "alerts.yaml"))
	if err != nil {
		return nil, err
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		return nil, fmt.Errorf("alerts.yaml: %w", err)
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			uses = append(uses, Use{Where: "alert " + r.Alert, Expr: r.Expr})
		}
	}
	return uses, nil
}

// Served reports whether a metric name is served, given the metric
// families of /metrics: its own family, or a histogram's (or summary's)
// series _bucket, _count or _sum.
func Served(name string, families map[string]bool) bool {
	if families[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] {
			return true
		}
	}
	return false
}

// Missing returns, for every use whose metrics are not all served, the
// names missing.
func Missing(uses []Use, families map[string]bool) (map[string][]string, error) {
	missing := map[string][]string{}
	for _, u := range uses {
		names, err := MetricNames(u.Expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", u.Where, err)
		}
		for _, n := range names {
			if !Served(n, families) {
				missing[u.Where] = append(missing[u.Where], n)
			}
		}
	}
	return missing, nil
}

// Families returns the metric names of scraped series (name{labels} keys,
// as tests.ScrapeMetrics returns them).
func Families(series map[string]float64) map[string]bool {
	families := map[string]bool{}
	for k := range series {
		name, _, _ := strings.Cut(k, "{")
		families[name] = true
	}
	return families
}
