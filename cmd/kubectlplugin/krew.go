package kubectlplugin

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

//go:embed krew.yaml.tmpl
var krewTemplate string

// Release is what the krew manifest of a release says.
type Release struct {
	// Version is the release's tag, a semantic version with a leading v.
	Version string
	// Homepage is the project's page.
	Homepage string
	// Archives hold kubectl-sandbox and kubectl_complete-sandbox at their
	// top level, one per platform.
	Archives []Archive
}

// Archive is one platform's release archive.
type Archive struct {
	OS, Arch string
	// URI is where krew downloads it from.
	URI string
	// SHA256 is the archive's digest, 64 lowercase hex digits.
	SHA256 string
}

// Ext is the executables' file extension on the archive's OS.
func (a Archive) Ext() string {
	if a.OS == "windows" {
		return ".exe"
	}
	return ""
}

var (
	semver    = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// archiveName is how make release-archives names them.
	archiveName = regexp.MustCompile(`^kubectl-sandbox_(.+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)
	oses        = map[string]bool{"linux": true, "darwin": true, "windows": true}
	arches      = map[string]bool{"amd64": true, "arm64": true}
)

// ArchiveFromFile describes the archive at path, named
// kubectl-sandbox_VERSION_OS_ARCH.tar.gz, to be downloaded from
// urlBase/NAME.
func ArchiveFromFile(path, urlBase string) (Archive, error) {
	m := archiveName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return Archive{}, fmt.Errorf("%s: want an archive named kubectl-sandbox_VERSION_OS_ARCH.tar.gz", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return Archive{}, fmt.Errorf("reading the archive: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Archive{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	return Archive{OS: m[2], Arch: m[3], URI: strings.TrimSuffix(urlBase, "/") + "/" + filepath.Base(path),
		SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// KrewManifest renders the krew plugin manifest (plugins/sandbox.yaml in
// krew-index) of r, refusing what krew would refuse.
func KrewManifest(r Release) ([]byte, error) {
	if !semver.MatchString(r.Version) {
		return nil, fmt.Errorf("version %q: krew wants a semantic version with a leading v, such as v0.1.0 (set VERSION)", r.Version)
	}
	if !strings.HasPrefix(r.Homepage, "https://") {
		return nil, fmt.Errorf("homepage %q: want an https URL", r.Homepage)
	}
	if len(r.Archives) == 0 {
		return nil, fmt.Errorf("no archives: krew needs at least one platform")
	}
	seen := map[string]bool{}
	for _, a := range r.Archives {
		platform := a.OS + "/" + a.Arch
		switch {
		case !oses[a.OS] || !arches[a.Arch]:
			return nil, fmt.Errorf("archive %s: platform %s is not one krew selects (linux, darwin, windows on amd64, arm64)", a.URI, platform)
		case seen[platform]:
			return nil, fmt.Errorf("archive %s: a second archive for %s", a.URI, platform)
		case !sha256Hex.MatchString(a.SHA256):
			return nil, fmt.Errorf("archive %s: sha256 %q is not 64 lowercase hex digits", a.URI, a.SHA256)
		case !strings.HasPrefix(a.URI, "https://"):
			return nil, fmt.Errorf("archive %s: krew downloads over https only", a.URI)
		}
		seen[platform] = true
	}
	t, err := template.New("krew").Funcs(template.FuncMap{"q": quote}).Option("missingkey=error").Parse(krewTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the krew template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, r); err != nil {
		return nil, fmt.Errorf("rendering the krew manifest: %w", err)
	}
	return b.Bytes(), nil
}

// quote writes s as a YAML string (a JSON string is one).
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
