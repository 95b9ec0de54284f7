package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("o", "", "output directory")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "compactjson:", err)
		os.Exit(1)
	}
}

func run(out string, files []string) error {
	if out == "" {
		return fmt.Errorf("-o is required")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var docs [][]byte
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			j, err := yaml.YAMLToJSON(doc)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			docs = append(docs, j)
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)) + ".json"
		if err := os.WriteFile(filepath.Join(out, name), append(bytes.Join(docs, []byte("\n")), '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
