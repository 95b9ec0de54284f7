package image

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSteps(t *testing.T) {
	cases := []struct {
		name       string
		dockerfile string
		want       []Step
		skipped    []string
		wantErr    string
	}{
		{
			name: "continuations, args, mounts and env",
			dockerfile: `# syntax=docker/dockerfile:1
ARG V=dev
FROM golang:1.26 AS build
ENV GOOS=linux
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# a comment between instructions
COPY a/ a/
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -ldflags "-X main.v=${V} -X 'main.q=$V'" \
      -o /out/x ./cmd/x && echo done
FROM scratch
COPY --from=build /out/x /x
`,
			want: []Step{
				{Copy: &Copy{Srcs: []string{"go.mod", "go.sum"}, Dst: "/src", IntoDir: true}},
				{Copy: &Copy{Srcs: []string{"a/"}, Dst: "/src/a", IntoDir: true}},
				{Build: &GoBuild{Args: []string{"build", "-ldflags", "-X main.v=dev -X 'main.q=dev'", "-o", "/out/x", "./cmd/x"},
					Env: []string{"GOOS=linux", "CGO_ENABLED=0"}, Dir: "/src", Line: 10}},
			},
			skipped: []string{"go mod download", "echo done"},
		},
		{
			name:       "relative workdirs and a file copied to a name",
			dockerfile: "FROM golang:1.26 AS build\nWORKDIR /a\nWORKDIR b\nCOPY x.go main.go\nRUN go build -o out .\n",
			want: []Step{
				{Copy: &Copy{Srcs: []string{"x.go"}, Dst: "/a/b/main.go"}},
				{Build: &GoBuild{Args: []string{"build", "-o", "out", "."}, Dir: "/a/b", Line: 5}},
			},
		},
		{name: "ADD is refused", dockerfile: "FROM golang:1.26 AS build\nADD x.tar /\n", wantErr: "line 2: ADD: not supported"},
		{name: "exec form RUN is refused", dockerfile: "FROM golang:1.26 AS build\nRUN [\"go\", \"build\"]\n", wantErr: "exec (JSON) form"},
		{name: "several sources need a directory", dockerfile: "FROM golang:1.26 AS build\nCOPY a b c\n", wantErr: "must end in /"},
		{name: "unterminated quote", dockerfile: "FROM golang:1.26 AS build\nRUN go build -ldflags \"-s\n", wantErr: "unterminated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			df, err := Parse([]byte(tc.dockerfile))
			if err != nil {
				t.Fatal(err)
			}
			st, err := df.Stage("build")
			if err != nil {
				t.Fatal(err)
			}
			steps, err := df.Steps(st)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Steps: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(steps.List, tc.want) {
				t.Errorf("steps:\n got %s\nwant %s", show(steps.List), show(tc.want))
			}
			if !slices.Equal(steps.Skipped, tc.skipped) {
				t.Errorf("skipped %q, want %q", steps.Skipped, tc.skipped)
			}
		})
	}
}

func show(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		if s.Copy != nil {
			b.WriteString("\n  copy " + strings.Join(s.Copy.Srcs, ",") + " -> " + s.Copy.Dst)
		} else {
			b.WriteString("\n  go " + shellJoin(s.Build.Args) + " env " + strings.Join(s.Build.Env, ",") + " in " + s.Build.Dir)
		}
	}
	return b.String()
}

func TestIgnored(t *testing.T) {
	c := &Context{}
	if err := c.setIgnore("# comment\n.work/\nbin\n*.md\ntests/\n!tests/keep.go\ndocs/**/*.png\n/dist\n"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		".work/x":            true,
		"bin":                true,
		"bin/kwok":           true,
		"binary.go":          false,
		"README.md":          true,
		"docs/README.md":     false, // * does not cross directories
		"tests/e2e/x.go":     true,
		"tests/keep.go":      false,
		"docs/a/b/c.png":     true,
		"docs/c.png":         true,
		"dist/install.yaml":  true,
		"api/v1beta1/x.go":   false,
		"config/crd/a.yaml":  false,
		"cmd/x/testdata.txt": false,
	} {
		if got := c.Ignored(path); got != want {
			t.Errorf("Ignored(%s) = %t, want %t", path, got, want)
		}
	}
}

// Apply copies as Docker's COPY does and leaves out what .dockerignore says.
func TestApply(t *testing.T) {
	ctxDir, fsRoot := t.TempDir(), t.TempDir()
	for _, f := range []string{"go.mod", "a/x.go", "a/b/y.go", "a/README.md", "c/z.go"} {
		p := filepath.Join(ctxDir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ctxDir, ".dockerignore"), []byte("**/*.md\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := OpenContext(ctxDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range []Copy{
		{Srcs: []string{"go.mod"}, Dst: "/src", IntoDir: true},
		{Srcs: []string{"a/"}, Dst: "/src/a", IntoDir: true},
		{Srcs: []string{"c/z.go"}, Dst: "/src/main.go"},
	} {
		if _, err := c.Apply(fsRoot, cp); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	_ = filepath.WalkDir(fsRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(fsRoot, p)
			got = append(got, rel)
		}
		return err
	})
	want := []string{"src/a/b/y.go", "src/a/x.go", "src/go.mod", "src/main.go"}
	if !slices.Equal(got, want) {
		t.Fatalf("copied %v, want %v", got, want)
	}
	if _, err := c.Apply(fsRoot, Copy{Srcs: []string{"a/README.md"}, Dst: "/src/", IntoDir: true}); err == nil || !strings.Contains(err.Error(), "excluded by .dockerignore") {
		t.Fatalf("copying an ignored file: %v", err)
	}
}

func TestCheckFinal(t *testing.T) {
	const build = "FROM golang:1.26 AS build\nRUN go build -o /out/x .\n"
	cases := []struct{ name, final, wantErr string }{
		{"ok", "COPY --from=build /out/x /x\nENTRYPOINT [\"/x\"]\n", ""},
		{"into a directory", "COPY --from=build /out/x /bin/\nENTRYPOINT [\"/bin/x\", \"--flag\"]\n", ""},
		{"copies what was not built", "COPY --from=build /out/y /y\nENTRYPOINT [\"/y\"]\n", "the build stage produces [/out/x], not that"},
		{"runs what was not copied", "COPY --from=build /out/x /x\nENTRYPOINT [\"/manager\"]\n", "ENTRYPOINT /manager is not a file"},
		{"shell form", "COPY --from=build /out/x /x\nENTRYPOINT /x\n", "exec (JSON) form"},
		{"no entrypoint", "COPY --from=build /out/x /x\n", "no ENTRYPOINT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			df, err := Parse([]byte(build + "FROM scratch\n" + tc.final))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckFinal(df, "build", []string{"/out/x"})
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckFinal: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckGoVersion(t *testing.T) {
	cases := []struct{ image, gomod, wantErr string }{
		{"golang:1.26", "go 1.26.0\n", ""},
		{"golang:1.26", "go 1.26.4\ntoolchain go1.26.5\n", ""},
		{"golang:1.26.1-bookworm", "go 1.26.0\n", ""},
		{"golang:1.26.1", "go 1.26.3\n", "older than go.mod's \"go 1.26.3\""},
		{"golang:1.25", "go 1.26.0\n", "older"},
		{"golang:1.26", "go 1.26\ntoolchain go1.27.0\n", "older than go.mod's \"toolchain go1.27.0\""},
		{"docker.io/library/golang:1.26@sha256:abc", "go 1.26.0\n", ""},
		{"debian:12", "go 1.26.0\n", "not golang:VERSION"},
	}
	for _, tc := range cases {
		t.Run(tc.image+" "+strings.ReplaceAll(tc.gomod, "\n", " "), func(t *testing.T) {
			df, err := Parse([]byte("FROM " + tc.image + " AS build\n"))
			if err != nil {
				t.Fatal(err)
			}
			err = CheckGoVersion(df, "build", []byte("module x\n\n"+tc.gomod))
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckGoVersion: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
