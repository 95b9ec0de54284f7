// Package docs keeps the documentation true: every shell command shown in
// README.md and docs/*.md runs in a test, and every relative link resolves.
//
// The rule for writers: each fenced block tagged sh, bash, shell or console
// is preceded (on the line before its fence) by a marker comment, either
//
//	<!-- docs-test: run -->
//	<!-- docs-test: run; timeout: 3m; expect: hi; needs: node npm -->
//	<!-- docs-test: skip: <why it cannot run here> -->
//
// A run block runs with bash -eo pipefail in a directory that looks like the
// checkout (its top-level entries, with bin/ holding freshly built binaries
// and .work/kwok holding the local cluster), against one local cluster
// started as `make run` starts it. Blocks run in page order (README.md first,
// then docs/ by name), each in a fresh shell: a block must stand alone, and
// must leave nothing later pages trip over (what it suspends it resumes).
// Background processes a block starts live until its page ends; a block
// whose needs are not on PATH is skipped, and says so in the log. The addresses `make run` documents
// (127.0.0.1:8080 for the router, ...) are replaced by the ones the cluster
// printed. Before the first page, the samples are Ready and what examples
// name exists: namespaces team-a and team-b, and manifests/ (a copy of
// config/samples, standing for a reader's own folder). A skip needs its
// reason; an unmarked block fails the test. Test names the pages cite
// (`TestXxx`) must exist, and relative links must resolve.
package docs
