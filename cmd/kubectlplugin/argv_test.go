package kubectlplugin

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func testRoot() *cobra.Command {
	root := &cobra.Command{Use: "kubectl-sandbox"}
	root.PersistentFlags().String("kubeconfig", "", "")
	root.PersistentFlags().StringP("namespace", "n", "", "")
	up := &cobra.Command{Use: "up", Run: func(*cobra.Command, []string) {}}
	up.Flags().String("name", "", "")
	up.Flags().String("workdir", "", "")
	up.Flags().StringArray("controller-arg", nil, "")
	up.Flags().BoolP("verbose", "v", false, "")
	up.Flags().Bool("v", false, "")
	up.Flags().Bool("foreground", false, "")
	exec := &cobra.Command{Use: "exec", Annotations: map[string]string{ArgsAfterName: "true"}, Run: func(*cobra.Command, []string) {}}
	exec.Flags().BoolP("stdin", "i", false, "")
	exec.Flags().BoolP("tty", "t", false, "")
	exec.Flags().Bool("it", false, "")
	exec.Flags().String("router", "", "")
	render := &cobra.Command{Use: "render", Run: func(*cobra.Command, []string) {}}
	render.Flags().StringP("filename", "f", "", "")
	render.Flags().BoolP("recursive", "R", false, "")
	render.Flags().Bool("from-cluster", false, "")
	policy := &cobra.Command{Use: "policy"}
	check := &cobra.Command{Use: "check", Run: func(*cobra.Command, []string) {}}
	check.Flags().StringP("filename", "f", "", "")
	check.Flags().String("bundle", "", "")
	policy.AddCommand(check)
	kubelet := &cobra.Command{Use: "kubelet", DisableFlagParsing: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(up, exec, render, policy, kubelet)
	return root
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"up -name x -workdir=w -foreground", "up --name x --workdir=w --foreground"},
		{"up --name x", "up --name x"},
		{"up -v", "up -v"},
		{"up --v", "up --v"},
		// A flag's value is never rewritten, even when it looks like a flag.
		{"up -controller-arg -name=x -name y", "up --controller-arg -name=x --name y"},
		{"-kubeconfig k exec -n ns sb ls -la", "--kubeconfig k exec -n ns sb -- ls -la"},
		{"exec -nns sb ls -name", "exec -nns sb -- ls -name"},
		{"exec -n=ns sb ls", "exec -n=ns sb -- ls"},
		{"exec -it sb -- sh", "exec --it sb -- sh"},
		{"exec -ti sb -- sh", "exec -ti sb -- sh"},
		{"exec sb -router x -- ls -router", "exec sb --router x -- ls -router"},
		{"exec -router http://x sb echo -name", "exec --router http://x sb -- echo -name"},
		{"exec sb", "exec sb --"},
		{"exec", "exec"},
		{"render -f - -R -from-cluster -kubeconfig=k", "render -f - -R --from-cluster --kubeconfig=k"},
		{"render -Rf dir -namespace x", "render -Rf dir --namespace x"},
		{"policy check -f x -bundle restricted", "policy check -f x --bundle restricted"},
		{"kubelet -kubeconfig k -dir d", "kubelet -kubeconfig k -dir d"},
		{"-kubeconfig k kubelet -runtime r", "--kubeconfig k kubelet -runtime r"},
		{"__complete exec -kubeconfig k sb", "__complete exec --kubeconfig k sb"},
		{"__complete up -name", "__complete up --name"},
		{"frobnicate -name x", "frobnicate -name x"},
		{"render -help", "render --help"},
		{"-help", "--help"},
		{"render -h", "render -h"},
	} {
		got := strings.Join(Normalize(testRoot(), strings.Fields(tc.in)), " ")
		if got != tc.want {
			t.Errorf("Normalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// Empty words (a completion's last, or an empty value) survive.
	if got := Normalize(testRoot(), []string{"__complete", "exec", ""}); len(got) != 3 || got[2] != "" {
		t.Errorf("Normalize kept %q", got)
	}
}
