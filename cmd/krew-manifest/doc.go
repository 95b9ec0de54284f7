// Command krew-manifest writes the krew plugin manifest of a release
// (plugins/sandbox.yaml in krew-index) to stdout, from the release archives
// make release-archives builds: their platform from their names, their
// sha256 from their bytes. It is flags and wiring only; the manifest is
// kubectlplugin.KrewManifest's.
//
//	krew-manifest -version v0.1.0 -url-base https://HOST/releases/download/v0.1.0 ARCHIVE...
package main
