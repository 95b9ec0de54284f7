package image

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	Cmd  string // upper case: FROM, COPY, RUN, ...
	Args string
	Line int // where it starts
}

// Stage is a FROM and the instructions up to the next FROM.
type Stage struct {
	Name, Base   string
	Instructions []Instruction
}

// Dockerfile is a parsed Dockerfile.
type Dockerfile struct {
	// Args are the ARGs before the first FROM, with their defaults.
	Args   map[string]string
	Stages []Stage
}

// Parse reads a Dockerfile: comments and blank lines dropped, lines ending
// in a backslash joined with the next.
func Parse(data []byte) (*Dockerfile, error) {
	df := &Dockerfile{Args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cur *Instruction
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(line, " ")
			cur = &Instruction{Cmd: strings.ToUpper(cmd), Line: n}
			line = strings.TrimSpace(args)
		}
		if strings.HasSuffix(line, `\`) {
			cur.Args += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cur.Args = strings.TrimSpace(cur.Args + line)
		if err := df.add(*cur); err != nil {
			return nil, err
		}
		cur = nil
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: %s continues past the end of the file", cur.Line, cur.Cmd)
	}
	if len(df.Stages) == 0 {
		return nil, errors.New("no FROM instruction")
	}
	return df, sc.Err()
}

func (df *Dockerfile) add(in Instruction) error {
	switch {
	case in.Cmd == "FROM":
		f := strings.Fields(in.Args)
		var st Stage
		switch {
		case len(f) == 1:
		case len(f) == 3 && strings.EqualFold(f[1], "AS"):
			st.Name = f[2]
		default:
			return fmt.Errorf("line %d: FROM %s: expected IMAGE [AS NAME]", in.Line, in.Args)
		}
		st.Base = f[0]
		df.Stages = append(df.Stages, st)
	case len(df.Stages) == 0:
		if in.Cmd != "ARG" {
			return fmt.Errorf("line %d: %s before FROM", in.Line, in.Cmd)
		}
		k, v, _ := strings.Cut(in.Args, "=")
		df.Args[k] = v
	default:
		st := &df.Stages[len(df.Stages)-1]
		st.Instructions = append(st.Instructions, in)
	}
	return nil
}

// Stage returns the stage of that name.
func (df *Dockerfile) Stage(name string) (*Stage, error) {
	for i := range df.Stages {
		if df.Stages[i].Name == name {
			return &df.Stages[i], nil
		}
	}
	return nil, fmt.Errorf("no stage named %q", name)
}

// Copy is a COPY from the build context: its sources (relative to the
// context, as written) and its absolute destination.
type Copy struct {
	Srcs []string
	Dst  string
	// IntoDir: Dst ends in "/" (or is "."), so a file source is copied
	// into it under its own name.
	IntoDir bool
	// From is the stage of a COPY --from=STAGE; empty for the context.
	From string
}

// GoBuild is a `go build` a RUN instruction runs.
type GoBuild struct {
	Args []string // after "go"
	Env  []string // NAME=value: the stage's ENV, then the command's own
	Dir  string   // absolute, in the image
	Line int
}

// Step is a COPY or a go build.
type Step struct {
	Copy  *Copy
	Build *GoBuild
}

// Steps are what a stage does, in order.
type Steps struct {
	List []Step
	// Skipped are RUN commands that are not run (not `go build`).
	Skipped []string
}

// Steps interprets the stage with the global ARG defaults. An instruction it
// does not know is an error.
func (df *Dockerfile) Steps(st *Stage) (*Steps, error) {
	vars := map[string]string{}
	for k, v := range df.Args {
		vars[k] = v
	}
	var env []string
	workdir := "/"
	out := &Steps{}
	for _, in := range st.Instructions {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d: %s: %s", in.Line, in.Cmd, fmt.Sprintf(format, a...))
		}
		switch in.Cmd {
		case "ARG":
			k, v, _ := strings.Cut(in.Args, "=")
			if _, ok := vars[k]; !ok || v != "" {
				vars[k] = v
			}
		case "ENV":
			words, err := split(in.Args, vars)
			if err != nil {
				return nil, fail("%v", err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					return nil, fail("only the NAME=value form is supported")
				}
				env = append(env, w)
				vars[k] = v
			}
		case "WORKDIR":
			words, err := split(in.Args, vars)
			if err != nil || len(words) != 1 {
				return nil, fail("expected one directory")
			}
			workdir = path.Join(workdir, words[0])
		case "COPY":
			words, err := split(in.Args, vars)
			if err != nil {
				return nil, fail("%v", err)
			}
			c := Copy{}
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				if from, ok := strings.CutPrefix(words[0], "--from="); ok {
					c.From = from
				}
				words = words[1:]
			}
			if len(words) < 2 {
				return nil, fail("expected SRC... DST")
			}
			c.Srcs = words[:len(words)-1]
			dst := words[len(words)-1]
			c.IntoDir = strings.HasSuffix(dst, "/") || dst == "."
			c.Dst = path.Join(workdir, dst) // an absolute dst stays as it is
			if path.IsAbs(dst) {
				c.Dst = path.Clean(dst)
			}
			if len(c.Srcs) > 1 && !c.IntoDir {
				return nil, fail("with several sources the destination must end in /")
			}
			out.List = append(out.List, Step{Copy: &c})
		case "RUN":
			if err := out.run(in, vars, env, workdir); err != nil {
				return nil, fail("%v", err)
			}
		case "LABEL", "EXPOSE", "USER", "ENTRYPOINT", "CMD", "STOPSIGNAL":
			// Do not change what is built.
		default:
			return nil, fail("not supported by this check")
		}
	}
	return out, nil
}

// run records the go builds of a RUN in shell form: options (--mount=...)
// first, then commands joined by && or ;, each with NAME=value prefixes.
func (s *Steps) run(in Instruction, vars map[string]string, env []string, workdir string) error {
	if strings.HasPrefix(in.Args, "[") {
		return errors.New("the exec (JSON) form is not supported")
	}
	words, err := split(in.Args, vars)
	if err != nil {
		return err
	}
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		words = words[1:]
	}
	for _, cmd := range commands(words) {
		cmdEnv := append([]string(nil), env...)
		for len(cmd) > 0 && isAssignment(cmd[0]) {
			cmdEnv = append(cmdEnv, cmd[0])
			cmd = cmd[1:]
		}
		if len(cmd) >= 2 && cmd[0] == "go" && cmd[1] == "build" {
			s.List = append(s.List, Step{Build: &GoBuild{Args: cmd[1:], Env: cmdEnv, Dir: workdir, Line: in.Line}})
		} else {
			s.Skipped = append(s.Skipped, strings.Join(cmd, " "))
		}
	}
	return nil
}

// commands splits words at && and ; (tokens of their own).
func commands(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		if w == "&&" || w == ";" {
			out, cur = append(out, cur), nil
			continue
		}
		cur = append(cur, w)
	}
	return append(out, cur)
}

func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// split splits a shell command line into words: single and double quotes,
// backslash escapes, and $NAME / ${NAME} from vars outside single quotes.
// Operators must stand alone (`a && b`, not `a&&b`).
func split(s string, vars map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == '$' && quote != '\'':
			name, n := varName(s[i+1:])
			if name == "" {
				w.WriteByte(c)
			} else {
				w.WriteString(vars[name])
				i += n
			}
			inWord = true
		case quote == '"':
			if c == '"' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// varName reads NAME or {NAME} at the start of s and how many bytes it took.
func varName(s string) (string, int) {
	if strings.HasPrefix(s, "{") {
		if end := strings.IndexByte(s, '}'); end > 1 {
			return s[1:end], end + 1
		}
		return "", 0
	}
	n := 0
	for n < len(s) && (s[n] == '_' || s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z' || n > 0 && s[n] >= '0' && s[n] <= '9') {
		n++
	}
	return s[:n], n
}
