// Package kubectlplugin holds what makes kubectl-sandbox behave as a kubectl
// plugin beyond its flags: the rewriting of the single-dash long flags that
// its earlier versions accepted (Go's flag package) into the double-dash
// form cobra parses, the claim and Sandbox names shell completion offers,
// and the krew plugin manifest published with a release.
//
// It never changes a cluster: completion only lists names, with the user's
// own credentials, and reports nothing when the API server refuses.
package kubectlplugin
