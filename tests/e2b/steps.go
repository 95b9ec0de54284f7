package e2b

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
)

// Step is one line sdk.mjs prints: a step's name, whether it passed, how
// long it took, and what it saw (Detail) or why it failed (Error).
type Step struct {
	Step   string          `json:"step"`
	OK     bool            `json:"ok"`
	Ms     float64         `json:"ms"`
	Detail json.RawMessage `json:"detail,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Summary is sdk.mjs's last line.
type Summary struct {
	Steps  int      `json:"steps"`
	Passed int      `json:"passed"`
	Failed []string `json:"failed"`
}

// ParseSteps reads sdk.mjs's output: a Step per line, then the summary.
// Lines that are not JSON objects are an error, as is a missing summary or
// one that disagrees with the steps (the script died half-way).
func ParseSteps(out []byte) ([]Step, Summary, error) {
	var steps []Step
	var sum *Summary
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if sum != nil {
			return steps, *sum, fmt.Errorf("output after the summary: %q", line)
		}
		var probe struct {
			Summary *Summary `json:"summary"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return steps, Summary{}, fmt.Errorf("a line that is not JSON: %q: %w", line, err)
		}
		if probe.Summary != nil {
			sum = probe.Summary
			continue
		}
		var s Step
		if err := json.Unmarshal(line, &s); err != nil || s.Step == "" {
			return steps, Summary{}, fmt.Errorf("a line that is not a step: %q", line)
		}
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		return steps, Summary{}, fmt.Errorf("reading the output: %w", err)
	}
	if sum == nil {
		return steps, Summary{}, fmt.Errorf("no summary line after %d steps (the script died?)", len(steps))
	}
	passed := 0
	for _, s := range steps {
		if s.OK {
			passed++
		}
	}
	if sum.Steps != len(steps) || sum.Passed != passed {
		return steps, *sum, fmt.Errorf("the summary %+v disagrees with the %d steps printed (%d passed)", *sum, len(steps), passed)
	}
	return steps, *sum, nil
}
