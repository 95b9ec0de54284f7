package image

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Context is a Docker build context: a directory and its .dockerignore.
type Context struct {
	Root   string
	ignore []ignoreRule
}

type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// OpenContext reads root/.dockerignore (absent: nothing is ignored).
func OpenContext(root string) (*Context, error) {
	c := &Context{Root: root}
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	} else if err != nil {
		return nil, err
	}
	return c, c.setIgnore(string(data))
}

func (c *Context) setIgnore(data string) error {
	for _, line := range strings.Split(data, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := ignoreRule{}
		if p, r.negate = strings.CutPrefix(p, "!"); r.negate {
			p = strings.TrimSpace(p)
		}
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
		re, err := globRegexp(p)
		if err != nil {
			return fmt.Errorf(".dockerignore: %q: %w", line, err)
		}
		r.re = re
		c.ignore = append(c.ignore, r)
	}
	return nil
}

// Ignored reports whether .dockerignore leaves the context-relative path
// (slash-separated) out of the context: the last rule that matches it or
// one of its parent directories decides.
func (c *Context) Ignored(rel string) bool {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	ignored := false
	for _, r := range c.ignore {
		for p := rel; ; p = path.Dir(p) {
			if r.re.MatchString(p) {
				ignored = !r.negate
				break
			}
			if !strings.Contains(p, "/") {
				break
			}
		}
	}
	return ignored
}

// globRegexp translates a .dockerignore pattern: * and ? within a path
// element, ** across elements, [...] classes, backslash escapes.
func globRegexp(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			if strings.HasPrefix(p[i:], "**") {
				i++
				if strings.HasPrefix(p[i+1:], "/") {
					i++
					b.WriteString("(.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return nil, errors.New("unterminated [")
			}
			class := p[i+1 : i+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += end
		case '\\':
			if i+1 < len(p) {
				i++
				b.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Apply performs a COPY from the context into the image file system rooted
// at fsRoot, as Docker does: a directory source copies its contents, a file
// source becomes Dst (or Dst/name with IntoDir), wildcards expand in the
// context, and what .dockerignore excludes is not there. It returns the
// context-relative files copied.
func (c *Context) Apply(fsRoot string, cp Copy) ([]string, error) {
	if cp.From != "" {
		return nil, fmt.Errorf("COPY --from=%s: copies between stages are not supported in the build stage", cp.From)
	}
	var copied []string
	for _, src := range cp.Srcs {
		matches, err := filepath.Glob(filepath.Join(c.Root, filepath.FromSlash(path.Clean("/"+src))))
		if err != nil {
			return nil, err
		}
		n := 0
		for _, m := range matches {
			rel, err := filepath.Rel(c.Root, m)
			if err != nil {
				return nil, err
			}
			if c.Ignored(filepath.ToSlash(rel)) {
				continue
			}
			n++
			dst := filepath.Join(fsRoot, filepath.FromSlash(cp.Dst))
			st, err := os.Lstat(m)
			if err != nil {
				return nil, err
			}
			if !st.IsDir() && (cp.IntoDir || len(matches) > 1) {
				dst = filepath.Join(dst, filepath.Base(m))
			}
			files, err := c.copyTree(m, dst)
			if err != nil {
				return nil, err
			}
			copied = append(copied, files...)
		}
		if n == 0 {
			return nil, fmt.Errorf("COPY %s: not in the build context (missing, or excluded by .dockerignore)", src)
		}
	}
	return copied, nil
}

// copyTree copies src (a file, link or directory of the context) to dst,
// leaving out what .dockerignore excludes.
func (c *Context) copyTree(src, dst string) ([]string, error) {
	var copied []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(c.Root, p)
		if err != nil {
			return err
		}
		if c.Ignored(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		within, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, within)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			copied = append(copied, filepath.ToSlash(rel))
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			copied = append(copied, filepath.ToSlash(rel))
			return copyFile(p, target)
		default:
			return fmt.Errorf("%s: not a file, link or directory", p)
		}
	})
	return copied, err
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
