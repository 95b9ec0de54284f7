package standin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var logTime = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func TestCRILines(t *testing.T) {
	const ts = "2026-01-02T03:04:05.000000006Z"
	long := strings.Repeat("x", maxLine+10)
	for _, tc := range []struct {
		name, in  string
		flush     bool
		want      string
		wantBytes int
	}{
		{"complete lines", "a\nb\n", false, ts + " stdout F a\n" + ts + " stdout F b\n", 4},
		{"a line without its end waits", "a\nb", false, ts + " stdout F a\n", 2},
		{"flush writes it", "a\nb", true, ts + " stdout F a\n" + ts + " stdout F b\n", 3},
		{"an empty line", "\n", false, ts + " stdout F \n", 1},
		{"a long line is split", long, false, ts + " stdout P " + long[:maxLine] + "\n", maxLine},
		{"nothing", "", true, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, used := criLines([]byte(tc.in), logTime, tc.flush)
			if string(out) != tc.want || used != tc.wantBytes {
				t.Errorf("criLines(%q) = %q, %d; want %q, %d", tc.in, out, used, tc.want, tc.wantBytes)
			}
		})
	}
}

// pumpOnce carries on where the last call (or the last stand-in) stopped,
// and starts over when the runtime's output was truncated for a new Pod.
func TestPumpOnce(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, rawLog)
	appendRaw := func(s string) {
		f, err := os.OpenFile(raw, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.WriteString(s)
		_ = f.Close()
	}
	cri := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, criLog))
		return strings.ReplaceAll(string(data), "2026-01-02T03:04:05.000000006Z stdout ", "")
	}
	if err := pumpOnce(dir, logTime, false); err != nil {
		t.Fatalf("no output yet: %v", err)
	}
	appendRaw("one\ntw")
	if err := pumpOnce(dir, logTime, false); err != nil {
		t.Fatal(err)
	}
	if got := cri(); got != "F one\n" {
		t.Fatalf("after one and a half lines: %q", got)
	}
	appendRaw("o\n")
	if err := pumpOnce(dir, logTime, false); err != nil {
		t.Fatal(err)
	}
	if err := pumpOnce(dir, logTime, false); err != nil { // nothing new: nothing written
		t.Fatal(err)
	}
	if got := cri(); got != "F one\nF two\n" {
		t.Fatalf("after the second line: %q", got)
	}
	if off := readOffset(dir); off != int64(len("one\ntwo\n")) {
		t.Fatalf("offset %d", off)
	}
	// A new Pod's process truncates the output (and startProcess removes
	// the CRI log and the offset; here only the output shrinks).
	if err := os.WriteFile(raw, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pumpOnce(dir, logTime, false); err != nil {
		t.Fatal(err)
	}
	if got := cri(); got != "F one\nF two\nF new\n" {
		t.Fatalf("after truncation: %q", got)
	}
}
