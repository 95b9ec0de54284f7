package shlex

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The expected words are what Python 3's shlex.split returns for the same
// input (generated with it, then frozen here).
func TestSplitLikeShlex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"echo hi", []string{"echo", "hi"}},
		{"  echo   hi  ", []string{"echo", "hi"}},
		{"", []string{}},
		{"   ", []string{}},
		{"echo 'a b'", []string{"echo", "a b"}},
		{"echo \"a b\"", []string{"echo", "a b"}},
		{"echo a\\ b", []string{"echo", "a b"}},
		{"echo $HOME", []string{"echo", "$HOME"}},
		{"echo ~ *.go", []string{"echo", "~", "*.go"}},
		{"a;b|c&&d>e", []string{"a;b|c&&d>e"}},
		{"echo #not-a-comment", []string{"echo", "#not-a-comment"}},
		{"x\"y z\"w", []string{"xy zw"}},
		{"a'' b", []string{"a", "b"}},
		{"a '' b", []string{"a", "", "b"}},
		{"\"\"", []string{""}},
		{"'' ''", []string{"", ""}},
		{"echo \"a\\$b\"", []string{"echo", "a\\$b"}},
		{"echo \"a\\\\b\\\"c\\d\"", []string{"echo", "a\\b\"c\\d"}},
		{"echo 'a\\b'", []string{"echo", "a\\b"}},
		{"a\\\nb", []string{"a\nb"}},
		{"\"\\\n\"", []string{"\\\n"}},
		{"a\tb\rc\nd", []string{"a", "b", "c", "d"}},
		{"a\u000bb\fc", []string{"a\u000bb\fc"}},
		{"\u00e9 \u00fc \u65e5\u672c", []string{"\u00e9", "\u00fc", "\u65e5\u672c"}},
		{"\\\\", []string{"\\"}},
		{"x\\\\ y", []string{"x\\", "y"}},
		{"'\"' \"'\"", []string{"\"", "'"}},
		{"sh -c \"sleep 100 & sleep 100\"", []string{"sh", "-c", "sleep 100 & sleep 100"}},
		{"python3 -c 'print(\"hi\")'", []string{"python3", "-c", "print(\"hi\")"}},
	} {
		got, err := Split(tc.in)
		if err != nil {
			t.Errorf("Split(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Split(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestSplitErrorsLikeShlex(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"echo \"abc", "No closing quotation"},
		{"echo 'x", "No closing quotation"},
		{"echo abc\\", "No escaped character"},
		{"echo \"abc\\", "No escaped character"},
		{"\"\\\\", "No closing quotation"},
	} {
		got, err := Split(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Split(%q) = %q, %v; want the error %q", tc.in, got, err, tc.want)
		}
	}
}

// quote is the inverse of Split for one word: single quotes around it, each
// single quote inside written as '"'"'.
func quote(w string) string {
	return "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
}

// FuzzSplitRoundTrip: any list of words, each quoted, splits back into
// exactly those words.
func FuzzSplitRoundTrip(f *testing.F) {
	for _, seed := range []string{"echo\x00hi", "a b\x00c'd\x00", "\x00", `"\$x\`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		words := strings.Split(joined, "\x00")
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = quote(w)
		}
		got, err := Split(" " + strings.Join(quoted, " \t\n") + " ")
		if err != nil {
			t.Fatalf("Split of quoted %q: %v", words, err)
		}
		if diff := cmp.Diff(words, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
