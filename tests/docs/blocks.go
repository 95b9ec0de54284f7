package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Marker is how a block is tagged (see the package comment).
const Marker = "docs-test:"

// DefaultTimeout bounds a run block that names no timeout.
const DefaultTimeout = time.Minute

// shellLangs are the info strings of blocks that hold commands.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Block is one fenced shell block of a page and what its marker says.
type Block struct {
	Page    string // path relative to the repository root
	Line    int    // line of the opening fence, 1-based
	Text    string // the commands, indentation of the fence removed
	Run     bool
	Reason  string        // why it is not run (skip blocks)
	Timeout time.Duration // run blocks
	Expect  []string      // strings its output must contain
	Needs   []string      // programs that must be on PATH, else it is skipped
}

// Where names the block for messages.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// Pages lists README.md and docs/*.md of root, in the order they run.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, fmt.Errorf("listing docs: %w", err)
	}
	sort.Strings(docs)
	pages := []string{"README.md"}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	return pages, nil
}

// ParseFile reads root/page and returns its shell blocks.
func ParseFile(root, page string) ([]Block, error) {
	data, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", page, err)
	}
	return Parse(page, string(data))
}

// Parse returns the shell blocks of a Markdown page with their markers. A
// shell block without a marker, a marker not followed by a fence, a skip
// without its reason and an unknown option are errors.
func Parse(page, markdown string) ([]Block, error) {
	var (
		blocks  []Block
		errs    []string
		pending *Block // the marker seen on the previous non-blank line
		pendAt  int
	)
	sc := bufio.NewScanner(strings.NewReader(markdown))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if body, ok := markerBody(trimmed); ok {
			if pending != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: marker not followed by a fenced block", page, pendAt))
			}
			b, err := parseMarker(body)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: %v", page, lineNo, err))
				pending = nil
				continue
			}
			pending, pendAt = &b, lineNo
			continue
		}
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" && pending != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: marker not followed by a fenced block", page, pendAt))
				pending = nil
			}
			continue
		}
		// An opening fence: read to its close.
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		lang := strings.Fields(strings.TrimPrefix(trimmed, "```") + " ")
		start := lineNo
		var text []string
		closed := false
		for sc.Scan() {
			lineNo++
			l := sc.Text()
			if strings.TrimSpace(l) == "```" {
				closed = true
				break
			}
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			text = append(text, l)
		}
		if !closed {
			errs = append(errs, fmt.Sprintf("%s:%d: fenced block never closed", page, start))
		}
		isShell := len(lang) > 0 && shellLangs[lang[0]]
		switch {
		case isShell && pending == nil:
			errs = append(errs, fmt.Sprintf("%s:%d: shell block without a %q marker on the line before it", page, start, "<!-- "+Marker+" ... -->"))
		case isShell:
			b := *pending
			b.Page, b.Line, b.Text = page, start, strings.Join(text, "\n")+"\n"
			blocks = append(blocks, b)
		case pending != nil:
			errs = append(errs, fmt.Sprintf("%s:%d: marker on a block that is not a shell block", page, pendAt))
		}
		pending = nil
	}
	if pending != nil {
		errs = append(errs, fmt.Sprintf("%s:%d: marker not followed by a fenced block", page, pendAt))
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Sprintf("%s: %v", page, err))
	}
	if len(errs) > 0 {
		return blocks, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return blocks, nil
}

// markerBody returns what follows "docs-test:" in an HTML comment line.
func markerBody(line string) (string, bool) {
	if !strings.HasPrefix(line, "<!--") || !strings.HasSuffix(line, "-->") {
		return "", false
	}
	inner := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "<!--"), "-->"))
	body, ok := strings.CutPrefix(inner, Marker)
	return strings.TrimSpace(body), ok
}

// parseMarker reads "run; timeout: 2m; expect: x; needs: a b" or "skip: reason".
func parseMarker(body string) (Block, error) {
	if reason, ok := strings.CutPrefix(body, "skip"); ok {
		reason = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(reason), ":"))
		if reason == "" {
			return Block{}, fmt.Errorf("skip without a reason: write %q", "<!-- "+Marker+" skip: <why> -->")
		}
		return Block{Reason: reason}, nil
	}
	parts := strings.Split(body, ";")
	if strings.TrimSpace(parts[0]) != "run" {
		return Block{}, fmt.Errorf("marker %q is neither run nor skip", body)
	}
	b := Block{Run: true, Timeout: DefaultTimeout}
	for _, p := range parts[1:] {
		key, value, ok := strings.Cut(p, ":")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || value == "" {
			return Block{}, fmt.Errorf("option %q is not key: value", strings.TrimSpace(p))
		}
		switch key {
		case "timeout":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return Block{}, fmt.Errorf("timeout %q is not a positive duration", value)
			}
			b.Timeout = d
		case "expect":
			b.Expect = append(b.Expect, value)
		case "needs":
			b.Needs = append(b.Needs, strings.Fields(value)...)
		default:
			return Block{}, fmt.Errorf("unknown option %q (timeout, expect, needs)", key)
		}
	}
	return b, nil
}
