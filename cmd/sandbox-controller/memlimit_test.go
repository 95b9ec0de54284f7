package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	write := func(t *testing.T, file, content string) string {
		root := t.TempDir()
		if file != "" {
			p := filepath.Join(root, file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name, file, content string
		ratio               float64
		env                 func(string) string
		want                int64
	}{
		{name: "cgroup v2 limit", file: "memory.max", content: "536870912\n", ratio: 0.9, env: noEnv, want: 483183820},
		{name: "cgroup v2 no limit", file: "memory.max", content: "max\n", ratio: 0.9, env: noEnv},
		{name: "cgroup v1 limit", file: "memory/memory.limit_in_bytes", content: "268435456\n", ratio: 0.5, env: noEnv, want: 134217728},
		{name: "cgroup v1 no limit", file: "memory/memory.limit_in_bytes", content: "9223372036854771712\n", ratio: 0.9, env: noEnv},
		{name: "no cgroup files", ratio: 0.9, env: noEnv},
		{name: "garbage", file: "memory.max", content: "lots", ratio: 0.9, env: noEnv},
		{name: "ratio 0 disables", file: "memory.max", content: "536870912", ratio: 0, env: noEnv},
		{name: "GOMEMLIMIT wins", file: "memory.max", content: "536870912", ratio: 0.9,
			env: func(k string) string { return map[string]string{"GOMEMLIMIT": "300MiB"}[k] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := memoryLimit(write(t, tc.file, tc.content), tc.ratio, tc.env)
			if got != tc.want {
				t.Fatalf("memoryLimit = %d (%s), want %d", got, why, tc.want)
			}
			if why == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestGCPercent(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name    string
		percent int
		gogc    string
		want    int
	}{
		{name: "default", percent: defaultGCPercent, want: defaultGCPercent},
		{name: "GOGC wins", percent: defaultGCPercent, gogc: "200", want: 0},
		{name: "GOGC=off wins", percent: 30, gogc: "off", want: 0},
		{name: "flag 0 leaves it", percent: 0, want: 0},
		{name: "flag", percent: 80, want: 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, why := gcPercent(tc.percent, env(tc.gogc)); got != tc.want || why == "" {
				t.Errorf("gcPercent(%d, GOGC=%q) = %d, %q; want %d", tc.percent, tc.gogc, got, why, tc.want)
			}
		})
	}
}
