package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentsandbox/reconciler/cmd/kubectlplugin"
)

func main() {
	r := kubectlplugin.Release{}
	var urlBase string
	flag.StringVar(&r.Version, "version", "", "the release's version, a semantic version with a leading v (v0.1.0)")
	flag.StringVar(&r.Homepage, "homepage", "https://github.com/agentsandbox/reconciler", "the project's page")
	flag.StringVar(&urlBase, "url-base", "", "where the archives are downloaded from (https://...); each archive's name is appended")
	flag.Parse()
	if urlBase == "" || flag.NArg() == 0 {
		_, _ = fmt.Fprintln(os.Stderr, "usage: krew-manifest -version vX.Y.Z -url-base https://... ARCHIVE...")
		os.Exit(2)
	}
	for _, p := range flag.Args() {
		a, err := kubectlplugin.ArchiveFromFile(p, urlBase)
		if err != nil {
			_, _ = fmt.Fprintf(os.Stderr, "krew-manifest: %v\n", err)
			os.Exit(1)
		}
		r.Archives = append(r.Archives, a)
	}
	out, err := kubectlplugin.KrewManifest(r)
	if err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "krew-manifest: %v\n", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(out)
}
