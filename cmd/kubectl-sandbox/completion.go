package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/reconciler/cmd/kubectlplugin"
)

// completionTimeout bounds the listing a TAB waits for.
const completionTimeout = 5 * time.Second

// completeNames completes exec's first argument, and for cp (remote) a
// CLAIM|SANDBOX: prefix, with the claims and Sandboxes of the namespace,
// listed from the API server with kubectl's flags; a local path (cp) is
// left to the shell's file completion.
func (a *app) completeNames(remote bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch {
		case !remote && len(args) > 0, remote && len(args) > 1:
			return nil, cobra.ShellCompDirectiveNoFileComp
		case remote && len(args) == 1 && isRemote(args[0]),
			remote && (strings.Contains(toComplete, ":") || strings.ContainsAny(toComplete, `/\`) || strings.HasPrefix(toComplete, ".")):
			// A path in the sandbox (not listed) or a local one, or the
			// local end of a download.
			return nil, cobra.ShellCompDirectiveDefault
		}
		cfg, err := a.kube.ToRESTConfig()
		if err != nil {
			cobra.CompDebugln("no cluster: "+err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		f := sandboxFlags{}
		f.resolve(a)
		ns, err := f.ns()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		names, err := kubectlplugin.Names(ctx, cfg, ns, toComplete)
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]cobra.Completion, 0, len(names))
		for _, n := range names {
			if remote {
				out = append(out, cobra.CompletionWithDesc(n.Name+":", n.Kind))
			} else {
				out = append(out, cobra.CompletionWithDesc(n.Name, n.Kind))
			}
		}
		if remote {
			// A cp source or target goes on with a path after the colon;
			// with no name listed, a local file.
			if len(out) == 0 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			return out, cobra.ShellCompDirectiveNoSpace
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func isRemote(arg string) bool {
	_, _, ok := remote(arg)
	return ok
}

// completeNamespaces completes -n with the cluster's namespaces.
func (a *app) completeNamespaces(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cfg, err := a.kube.ToRESTConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	names, err := kubectlplugin.Namespaces(ctx, cfg, toComplete)
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
