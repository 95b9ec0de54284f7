package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// GoEnv is set for every go build on top of this process's environment and
// under the Dockerfile's own: modules exactly as go.mod and go.sum say, from
// the local module cache (no network, as if `go mod download` had run), with
// the local Go toolchain.
var GoEnv = []string{"GOFLAGS=-mod=readonly", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local"}

// Result is what BuildStage did.
type Result struct {
	// Copied are the context files the COPY instructions took.
	Copied []string
	// Outputs are the paths in the image the go builds wrote (their -o).
	Outputs []string
	// Skipped are RUN commands that were not run.
	Skipped []string
}

// BuildStage lays out the named stage's COPYs from contextDir in fsRoot (the
// image's file system) and runs its go builds there, in order. Build output
// goes to log.
func BuildStage(ctx context.Context, contextDir string, df *Dockerfile, stage, fsRoot string, log io.Writer) (*Result, error) {
	st, err := df.Stage(stage)
	if err != nil {
		return nil, err
	}
	steps, err := df.Steps(st)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", stage, err)
	}
	bc, err := OpenContext(contextDir)
	if err != nil {
		return nil, err
	}
	res := &Result{Skipped: steps.Skipped}
	for _, s := range steps.List {
		if s.Copy != nil {
			files, err := bc.Apply(fsRoot, *s.Copy)
			if err != nil {
				return nil, err
			}
			res.Copied = append(res.Copied, files...)
			continue
		}
		out, err := goBuild(ctx, fsRoot, *s.Build, log)
		if err != nil {
			return nil, err
		}
		res.Outputs = append(res.Outputs, out)
	}
	if len(res.Outputs) == 0 {
		return nil, fmt.Errorf("stage %s runs no go build", stage)
	}
	return res, nil
}

// goBuild runs one go build with its -o moved under fsRoot, and returns the
// output's path in the image.
func goBuild(ctx context.Context, fsRoot string, b GoBuild, log io.Writer) (string, error) {
	args := slices.Clone(b.Args)
	out := ""
	for i, a := range args {
		var v string
		switch {
		case a == "-o" && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, "-o="):
			v = strings.TrimPrefix(a, "-o=")
		default:
			continue
		}
		if !path.IsAbs(v) {
			v = path.Join(b.Dir, v)
		}
		out = v
		local := filepath.Join(fsRoot, filepath.FromSlash(v))
		if a == "-o" {
			args[i+1] = local
		} else {
			args[i] = "-o=" + local
		}
		break
	}
	if out == "" {
		return "", fmt.Errorf("line %d: go build without -o: the check cannot tell what it produced", b.Line)
	}
	dir := filepath.Join(fsRoot, filepath.FromSlash(b.Dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), GoEnv...), b.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("line %d: go %s (in %s): %w", b.Line, shellJoin(b.Args), b.Dir, err)
	}
	if st, err := os.Stat(filepath.Join(fsRoot, filepath.FromSlash(out))); err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("line %d: go build did not write an executable %s", b.Line, out)
	}
	return out, nil
}

// CheckFinal checks the stage the image is made of (the last one): every
// COPY --from=build takes something the build stage produced, and its
// ENTRYPOINT (exec form) runs a file that stage copied in.
func CheckFinal(df *Dockerfile, build string, outputs []string) error {
	final := df.Stages[len(df.Stages)-1]
	var copied []string
	var entrypoint string
	for _, in := range final.Instructions {
		switch in.Cmd {
		case "COPY":
			words, err := split(in.Args, df.Args)
			if err != nil {
				return fmt.Errorf("line %d: %w", in.Line, err)
			}
			from := ""
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				if f, ok := strings.CutPrefix(words[0], "--from="); ok {
					from = f
				}
				words = words[1:]
			}
			if len(words) < 2 {
				return fmt.Errorf("line %d: COPY: expected SRC... DST", in.Line)
			}
			srcs, dst := words[:len(words)-1], words[len(words)-1]
			for _, src := range srcs {
				if from == build && !slices.Contains(outputs, path.Clean(src)) {
					return fmt.Errorf("line %d: COPY --from=%s %s: the build stage produces %v, not that", in.Line, build, src, outputs)
				}
				if strings.HasSuffix(dst, "/") {
					copied = append(copied, path.Join(dst, path.Base(src)))
				} else {
					copied = append(copied, path.Clean(dst))
				}
			}
		case "ENTRYPOINT":
			if !strings.HasPrefix(in.Args, "[") {
				return fmt.Errorf("line %d: ENTRYPOINT: use the exec (JSON) form", in.Line)
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(in.Args, "["), ",")
			first = strings.TrimSuffix(strings.TrimSpace(first), "]")
			v, err := strconv.Unquote(strings.TrimSpace(first))
			if err != nil {
				return fmt.Errorf("line %d: ENTRYPOINT %s: %w", in.Line, in.Args, err)
			}
			entrypoint = v
		}
	}
	if entrypoint == "" {
		return errors.New("the final stage has no ENTRYPOINT")
	}
	if !slices.Contains(copied, path.Clean(entrypoint)) {
		return fmt.Errorf("ENTRYPOINT %s is not a file the final stage copies in (%v)", entrypoint, copied)
	}
	return nil
}

// CheckGoVersion checks that a golang:X.Y[.Z][-variant] base image of the
// stage provides at least the Go that go.mod's go and toolchain lines ask
// for (the image runs with GOTOOLCHAIN=local and cannot fetch a newer one).
// X.Y without a patch is the newest X.Y.Z and satisfies any X.Y.
func CheckGoVersion(df *Dockerfile, stage string, gomod []byte) error {
	st, err := df.Stage(stage)
	if err != nil {
		return err
	}
	repo, tag, ok := strings.Cut(strings.SplitN(st.Base, "@", 2)[0], ":")
	if !ok || path.Base(repo) != "golang" {
		return fmt.Errorf("stage %s: base image %s is not golang:VERSION", stage, st.Base)
	}
	tag, _, _ = strings.Cut(tag, "-")
	have, err := parseVersion(tag)
	if err != nil {
		return fmt.Errorf("stage %s: base image %s: %w", stage, st.Base, err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "go" && f[0] != "toolchain") {
			continue
		}
		want, err := parseVersion(strings.TrimPrefix(f[1], "go"))
		if err != nil {
			return fmt.Errorf("go.mod: %s: %w", line, err)
		}
		if len(have) == 2 {
			want = want[:2] // golang:X.Y is the newest X.Y
		}
		if slices.Compare(have, want) < 0 {
			return fmt.Errorf("base image %s is older than go.mod's %q", st.Base, strings.TrimSpace(line))
		}
	}
	return nil
}

// parseVersion reads X.Y or X.Y.Z.
func parseVersion(v string) ([]int, error) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("version %q: want X.Y or X.Y.Z", v)
	}
	var out []int
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("version %q: %w", v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// shellJoin spells argv the way a shell would read it back.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}
