package e2b

import (
	"strings"
	"testing"
)

func TestParseNodeVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [3]int
		old  bool
	}{
		{"v20.20.2\n", [3]int{20, 20, 2}, false},
		{"v20.18.0", [3]int{20, 18, 0}, true},
		{"v22.1.0-nightly", [3]int{22, 1, 0}, false},
		{"v18.19.1", [3]int{18, 19, 1}, true},
	} {
		v, err := parseNodeVersion(tc.in)
		if err != nil || v != tc.want {
			t.Errorf("parseNodeVersion(%q) = %v, %v; want %v", tc.in, v, err, tc.want)
		}
		if less(v, minNode) != tc.old {
			t.Errorf("%q older than %v: %v, want %v", tc.in, minNode, less(v, minNode), tc.old)
		}
	}
	for _, bad := range []string{"", "v20", "20.x.1"} {
		if _, err := parseNodeVersion(bad); err == nil {
			t.Errorf("parseNodeVersion(%q) succeeded; want an error", bad)
		}
	}
}

func TestParseSteps(t *testing.T) {
	good := `{"step":"create","ok":true,"ms":12.5,"detail":{}}
{"step":"echo","ok":false,"ms":3,"error":"Error: stdout: got \"\""}
{"summary":{"steps":2,"passed":1,"failed":["echo"]}}
`
	steps, sum, err := ParseSteps([]byte(good))
	if err != nil || len(steps) != 2 || !steps[0].OK || steps[1].OK || sum.Passed != 1 || len(sum.Failed) != 1 {
		t.Fatalf("ParseSteps = %+v, %+v, %v", steps, sum, err)
	}
	for name, out := range map[string]string{
		"no summary":       `{"step":"create","ok":true,"ms":1}`,
		"not JSON":         "node: something broke\n" + `{"summary":{"steps":0,"passed":0,"failed":[]}}`,
		"summary lies":     `{"step":"create","ok":false,"ms":1}` + "\n" + `{"summary":{"steps":1,"passed":1,"failed":[]}}`,
		"after summary":    `{"summary":{"steps":0,"passed":0,"failed":[]}}` + "\n" + `{"step":"x","ok":true,"ms":1}`,
		"nameless step":    `{"ok":true,"ms":1}` + "\n" + `{"summary":{"steps":1,"passed":1,"failed":[]}}`,
		"missing step out": `{"summary":{"steps":3,"passed":3,"failed":[]}}`,
	} {
		if _, _, err := ParseSteps([]byte(out)); err == nil {
			t.Errorf("%s: ParseSteps(%q) succeeded; want an error", name, strings.TrimSpace(out))
		}
	}
}
