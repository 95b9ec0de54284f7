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

func expand(p string, recursive bool) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, &inputError{err.Error()}
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.EqualFold(d.Name(), "kustomization.yaml") || strings.EqualFold(d.Name(), "kustomization.yml") {
			return nil // kustomize's own file, not a manifest
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
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
