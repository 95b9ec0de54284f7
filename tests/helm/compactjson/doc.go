// Command compactjson writes YAML documents as compact JSON, one file per
// input file (name.yaml -> name.json) in -o: make chart-files stores the
// CRDs in the Helm chart so, because Helm keeps the whole chart (files
// base64-encoded) and the rendered manifest in a release Secret, which may
// not exceed 1 MiB; indented YAML CRDs pushed it over.
package main
