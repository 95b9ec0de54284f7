package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// document is one manifest from the input, with where it came from.
type document struct {
	File  string
	Index int // 0-based document index in the file
	Line  int // line where the document starts
	Obj   *unstructured.Unstructured
}

func (d document) where() string {
	return fmt.Sprintf("%s: document %d (line %d)", d.File, d.Index, d.Line)
}

// inputError is bad input: a precise message, exit code 2.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// readManifests reads every document from the paths (files, directories,
// "-" for stdin), descending into subdirectories with recursive.
func readManifests(paths []string, recursive bool, stdin io.Reader) ([]document, error) {
	if len(paths) == 0 {
		return nil, &inputError{"no input: give -f FILE|DIR|- (repeatable)"}
	}
	var docs []document
	for _, p := range paths {
		if p == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, err
			}
			more, err := parse("<stdin>", data)
			if err != nil {
				return nil, err
			}
			docs = append(docs, more...)
			continue
		}
		files, err := expand(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, &inputError{err.Error()}
			}
			more, err := parse(f, data)
			if err != nil {
				return nil, err
			}
			docs = append(docs, more...)
		}
	}
	return docs, nil
}

// expand lists the manifests p names: p itself when it is a file, else the
// *.yaml, *.yml and *.json files in the directory (and, with recursive, its
// subdirectories; kustomization.yaml excluded), sorted.
//
// A directory is a tree the user handed over, and nothing outside it is read:
// a symbolic link in it whose target resolves outside the directory is
// refused (an input error naming the link and its target), as is a link that
// cannot be resolved (dangling, or a loop) and a file that is not a regular
// file (a FIFO would block the read). Links that stay inside the tree are
// followed for files; a linked directory inside the tree is not descended
// into, since its files are reached through their real path (and a link to an
// ancestor would otherwise loop).
func expand(p string, recursive bool) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, &inputError{err.Error()}
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	root, err := realPath(p)
	if err != nil {
		return nil, &inputError{err.Error()}
	}
	walkRoot := p
	if l, err := os.Lstat(p); err == nil && l.Mode()&os.ModeSymlink != 0 {
		// The directory was named through a link: walk what it points to
		// (WalkDir does not follow a link at the root otherwise).
		walkRoot = p + string(filepath.Separator)
	}
	var out []string
	err = filepath.WalkDir(walkRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		isDir := d.IsDir()
		if d.Type()&os.ModeSymlink != 0 {
			if !recursive && !isManifest(d.Name()) {
				return nil // neither read nor descended into
			}
			target, err := insideTree(root, p, path)
			if err != nil {
				return err
			}
			st, err := os.Stat(target)
			if err != nil {
				return &inputError{fmt.Sprintf("%s: %v", path, err)}
			}
			if st.IsDir() {
				return nil // its files are walked through their real path
			}
			isDir = false
		}
		if isDir {
			if path != walkRoot && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if !isManifest(d.Name()) {
			return nil
		}
		if st, err := os.Stat(path); err != nil {
			return &inputError{fmt.Sprintf("%s: %v", path, err)}
		} else if !st.Mode().IsRegular() {
			return &inputError{fmt.Sprintf("%s: not a regular file (%s); refusing to read it", path, st.Mode().Type())}
		}
		out = append(out, path)
		return nil
	})
	sort.Strings(out)
	return out, err
}

// isManifest reports whether a file name is one expand reads.
func isManifest(name string) bool {
	if strings.EqualFold(name, "kustomization.yaml") || strings.EqualFold(name, "kustomization.yml") {
		return false // kustomize's own file, not a manifest
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// insideTree resolves the symbolic link at path, found while walking the
// directory given as arg (whose real path is root), and returns its target
// if that lies inside root.
func insideTree(root, arg, path string) (string, error) {
	target, err := realPath(path)
	if err != nil {
		// ELOOP for a loop, ENOENT for a dangling link: refused, never retried.
		return "", &inputError{fmt.Sprintf("%s: symbolic link cannot be resolved: %v", path, unwrapPath(err))}
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", &inputError{fmt.Sprintf("%s: symbolic link to %s, which is outside %s; refusing to follow it (copy the file into the directory, or pass it with its own -f)", path, target, arg)}
	}
	return target, nil
}

// realPath is the absolute path of p with every symbolic link resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// unwrapPath drops the operation and path of a *fs.PathError (the message
// names the link already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parse splits a file into documents, keeping each document's first line
// so that YAML errors point at the line in the file.
func parse(file string, data []byte) ([]document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	starts := docStarts(data)
	var docs []document
	for i := 0; ; i++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, &inputError{fmt.Sprintf("%s: document %d: %v", file, i, err)}
		}
		start := 1
		if i < len(starts) {
			start = starts[i]
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, &inputError{fmt.Sprintf("%s: document %d: %s", file, i, shiftLine(err.Error(), start))}
		}
		if len(obj) == 0 {
			continue
		}
		docs = append(docs, document{File: file, Index: i, Line: start, Obj: &unstructured.Unstructured{Object: obj}})
	}
	return docs, nil
}

// docStarts returns the first line of each document: line 1, and the line
// after each "---" separator.
func docStarts(data []byte) []int {
	starts := []int{1}
	for n, l := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimRight(l, " \t\r")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			if n == 0 {
				continue // the reader keeps a leading separator in the first document
			}
			starts = append(starts, n+2)
		}
	}
	return starts
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) == 0 || t[0] == '#' || bytes.Equal(t, []byte("---")) {
			continue
		}
		out = append(out, l)
	}
	return bytes.Join(out, []byte("\n"))
}

// shiftLine rewrites "line N" in a YAML error to the line in the file.
func shiftLine(msg string, start int) string {
	var n int
	i := strings.Index(msg, "line ")
	if i < 0 {
		return msg
	}
	if _, err := fmt.Sscanf(msg[i:], "line %d", &n); err != nil {
		return msg
	}
	return strings.Replace(msg, fmt.Sprintf("line %d", n), fmt.Sprintf("line %d", n+start-1), 1)
}
