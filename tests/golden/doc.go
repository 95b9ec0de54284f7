// Package golden compares test output with files under the repository's
// golden/ directory. Run the tests with -update (or `make golden`) to rewrite
// the files from the current output, then review the diff like code. YAML is
// written with sorted keys so that files are stable. It must never be
// imported by product code.
package golden
