package kubectlplugin

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ArgsAfterName is the annotation (any non-empty value) of a command such
// as exec whose first positional argument is followed by a command line of
// its own: without "--", Normalize inserts one after that argument, so
// that the command line's flags are not taken for the plugin's.
const ArgsAfterName = "kubectlplugin/args-after-name"

// Normalize rewrites args for root's Execute: a single-dash spelling of a
// long flag the command has ("-kubeconfig x", "-from-cluster") becomes its
// double-dash form, as Go's flag package accepted both; shorthands ("-n",
// "-it", "-f x") stay as they are; nothing after "--", nothing a command
// with DisableFlagParsing receives and no flag value is touched. Arguments
// of cobra's hidden completion command are normalized like a command line.
func Normalize(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args)+1)
	cmd := root
	// -help as Go's flag package took it: cobra adds --help only when
	// it runs.
	cmd.InitDefaultHelpFlag()
	completing := false
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !isFlag(a) {
			out = append(out, a)
			if positional == 0 {
				if cmd == root && !completing && (a == cobra.ShellCompRequestCmd || a == cobra.ShellCompNoDescRequestCmd) {
					completing = true
					continue
				}
				if sub := subcommand(cmd, a); sub != nil {
					cmd = sub
					cmd.InitDefaultHelpFlag()
					if sub.DisableFlagParsing {
						return append(out, args[i+1:]...)
					}
					continue
				}
			}
			positional++
			if positional == 1 && cmd.Annotations[ArgsAfterName] != "" && !completing && !slices.Contains(args[i+1:], "--") {
				out = append(out, "--")
				return append(out, args[i+1:]...)
			}
			continue
		}
		double := strings.HasPrefix(a, "--")
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := lookup(cmd, name)
		if !double && f != nil && (len(name) > 1 || shorthand(cmd, name) == nil) {
			a, double = "-"+a, true
		}
		out = append(out, a)
		if !double {
			// Shorthands, possibly combined (-it, -nteam, -Rf DIR): the
			// last one may take the next argument as its value.
			f, inline = nil, false
			for j := 1; j < len(a); j++ {
				s := shorthand(cmd, a[j:j+1])
				if s == nil || s.NoOptDefVal == "" {
					f, inline = s, j+1 < len(a)
					break
				}
			}
		}
		if f != nil && f.NoOptDefVal == "" && !inline && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// isFlag tells a flag from a positional argument ("-" is stdin).
func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// flagSets are the flags cmd parses: its own and its ancestors' persistent
// ones.
func flagSets(cmd *cobra.Command) []*pflag.FlagSet {
	sets := []*pflag.FlagSet{cmd.Flags()}
	for c := cmd; c != nil; c = c.Parent() {
		sets = append(sets, c.PersistentFlags())
	}
	return sets
}

func lookup(cmd *cobra.Command, name string) *pflag.Flag {
	for _, fs := range flagSets(cmd) {
		if f := fs.Lookup(name); f != nil {
			return f
		}
	}
	return nil
}

func shorthand(cmd *cobra.Command, s string) *pflag.Flag {
	if len(s) != 1 {
		return nil
	}
	for _, fs := range flagSets(cmd) {
		if f := fs.ShorthandLookup(s); f != nil {
			return f
		}
	}
	return nil
}
