package kubectlplugin

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin (index.krew.googlecontainertools
// v1alpha2) that krew validates.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

func TestKrewManifest(t *testing.T) {
	dir := t.TempDir()
	var archives []Archive
	for _, p := range []string{"linux_amd64", "darwin_arm64", "windows_amd64"} {
		f := filepath.Join(dir, "kubectl-sandbox_v1.2.3_"+p+".tar.gz")
		if err := os.WriteFile(f, []byte("archive "+p), 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := ArchiveFromFile(f, "https://example.com/releases/download/v1.2.3/")
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, a)
	}
	out, err := KrewManifest(Release{Version: "v1.2.3", Homepage: "https://example.com/agent-sandbox", Archives: archives})
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(out, &p); err != nil {
		t.Fatalf("the manifest is not the YAML krew reads: %v\n%s", err, out)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "sandbox" {
		t.Errorf("apiVersion/kind/name = %s/%s/%s", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != "v1.2.3" || p.Spec.ShortDescription == "" || len(p.Spec.ShortDescription) > 50 || p.Spec.Homepage == "" || p.Spec.Description == "" {
		t.Errorf("spec = %+v; krew wants the version, a homepage, a short description of at most 50 characters and a description", p.Spec)
	}
	if len(p.Spec.Platforms) != 3 {
		t.Fatalf("%d platforms, want 3", len(p.Spec.Platforms))
	}
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	// sha256("archive linux_amd64")
	const linuxSum = "31b0bd9afe45ab7c820485a3b57048e28022df7bf3d531735543caccd31511db"
	for i, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		want := "https://example.com/releases/download/v1.2.3/kubectl-sandbox_v1.2.3_" + os + "_" + arch + ".tar.gz"
		if pl.URI != want || !hex.MatchString(pl.SHA256) {
			t.Errorf("platform %d: uri %s sha256 %s; want %s and a digest", i, pl.URI, pl.SHA256, want)
		}
		bin := "kubectl-sandbox"
		if os == "windows" {
			bin += ".exe"
		}
		if pl.Bin != bin || len(pl.Files) != 2 || pl.Files[0].From != bin || pl.Files[0].To != "." ||
			!strings.HasPrefix(pl.Files[1].From, "kubectl_complete-sandbox") {
			t.Errorf("platform %s/%s: bin %s, files %+v", os, arch, pl.Bin, pl.Files)
		}
		if os == "linux" && pl.SHA256 != linuxSum {
			t.Errorf("linux sha256 %s, want %s", pl.SHA256, linuxSum)
		}
	}
}

func TestKrewManifestRefuses(t *testing.T) {
	good := Archive{OS: "linux", Arch: "amd64", URI: "https://example.com/a.tar.gz", SHA256: strings.Repeat("a", 64)}
	for _, tc := range []struct {
		name string
		r    Release
		want string
	}{
		{"git describe version", Release{Version: "08eda6a-dirty", Homepage: "https://x", Archives: []Archive{good}}, "semantic version"},
		{"no archives", Release{Version: "v0.1.0", Homepage: "https://x"}, "no archives"},
		{"short digest", Release{Version: "v0.1.0", Homepage: "https://x", Archives: []Archive{{OS: "linux", Arch: "amd64", URI: good.URI, SHA256: "abc"}}}, "64 lowercase hex"},
		{"plain http", Release{Version: "v0.1.0", Homepage: "https://x", Archives: []Archive{{OS: "linux", Arch: "amd64", URI: "http://example.com/a.tar.gz", SHA256: good.SHA256}}}, "https only"},
		{"twice the platform", Release{Version: "v0.1.0", Homepage: "https://x", Archives: []Archive{good, good}}, "a second archive"},
		{"unknown OS", Release{Version: "v0.1.0", Homepage: "https://x", Archives: []Archive{{OS: "plan9", Arch: "amd64", URI: good.URI, SHA256: good.SHA256}}}, "not one krew selects"},
		{"YAML in a value", Release{Version: "v0.1.0", Homepage: "https://x\nkind: Other", Archives: []Archive{good}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := KrewManifest(tc.r)
			if tc.want == "" {
				// Rendered, but a value cannot add keys to the manifest.
				var p krewPlugin
				if err != nil || yaml.UnmarshalStrict(out, &p) != nil || p.Kind != "Plugin" {
					t.Errorf("err %v, kind %q\n%s", err, p.Kind, out)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := ArchiveFromFile(filepath.Join(t.TempDir(), "sandbox.zip"), "https://x"); err == nil {
		t.Error("an archive not named kubectl-sandbox_VERSION_OS_ARCH.tar.gz was taken")
	}
}
