package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fenceRE   = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```\\s*$")
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// Slug is the anchor GitHub makes of a heading.
func Slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// Anchors returns the anchors of a Markdown page's headings (code blocks
// left out).
func Anchors(markdown string) map[string]bool {
	text := fenceRE.ReplaceAllString(markdown, "")
	anchors := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		base := Slug(m[1])
		a := base
		for i := 1; anchors[a]; i++ {
			a = fmt.Sprintf("%s-%d", base, i)
		}
		anchors[a] = true
	}
	return anchors
}

// BrokenLinks returns the relative links of root/page that lead nowhere: a
// file or directory that does not exist, or a #fragment that is no heading
// of the Markdown page it names.
func BrokenLinks(root, page string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", page, err)
	}
	text := fenceRE.ReplaceAllString(string(data), "")
	var broken []string
	for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		path := filepath.Join(root, page)
		if file != "" {
			path = filepath.Join(root, filepath.Dir(page), file)
		}
		if _, err := os.Stat(path); err != nil {
			broken = append(broken, fmt.Sprintf("%s: %s: no such file", page, target))
			continue
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(path, ".md") {
			broken = append(broken, fmt.Sprintf("%s: %s: a fragment on a file that is not Markdown", page, target))
			continue
		}
		md, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if !Anchors(string(md))[frag] {
			broken = append(broken, fmt.Sprintf("%s: %s: no such heading", page, target))
		}
	}
	return broken, nil
}

var testNameRE = regexp.MustCompile("`(Test[A-Z][A-Za-z0-9_]*)`|\\b(Test[A-Z][A-Za-z0-9_]*) \\(")

// CitedTests returns the test names a page cites: `TestXxx` in code spans,
// and TestXxx followed by its package in parentheses.
func CitedTests(markdown string) []string {
	seen := map[string]bool{}
	var names []string
	for _, m := range testNameRE.FindAllStringSubmatch(markdown, -1) {
		n := m[1] + m[2]
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}
