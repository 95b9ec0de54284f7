package policy

import (
	"strings"
	"testing"
)

// A bundle exported in warn or audit mode binds with that action, however
// the binding spells its list, and keeps its comments and validations.
func TestInModeEditsTheBindingAsYAML(t *testing.T) {
	src, err := Bundle(BundleBaseline)
	if err != nil {
		t.Fatal(err)
	}
	// The same binding with its list in block style: a text replacement of
	// "validationActions: [Deny]" would leave it denying.
	block := src
	block.Data = []byte(strings.Replace(string(src.Data), "validationActions: [Deny]", "validationActions:\n  - Deny", 1))
	for name, s := range map[string]Source{"as shipped": src, "block list": block} {
		for _, m := range []Mode{ModeWarn, ModeAudit} {
			out, err := s.InMode(m)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, m, err)
			}
			text := string(out.Data)
			want := "validationActions: [" + string(m.action()) + "]"
			if !strings.Contains(text, want) || strings.Contains(text, "Deny") {
				t.Errorf("%s, %s: binding not set to %q:\n%s", name, m, want, text)
			}
			if !strings.Contains(text, "# baseline:") {
				t.Errorf("%s, %s: the bundle's comments were lost", name, m)
			}
			set, err := Load(out)
			if err != nil {
				t.Fatalf("%s, %s: the edited bundle does not load: %v", name, m, err)
			}
			orig, _ := Load(src)
			if got, want := len(set.policies), len(orig.policies); got != want {
				t.Errorf("%s, %s: %d policies after the edit, want %d", name, m, got, want)
			}
		}
	}
	if out, err := src.InMode(ModeEnforce); err != nil || string(out.Data) != string(src.Data) {
		t.Errorf("enforce changed the bundle (err %v)", err)
	}
	if _, err := (Source{Name: "b", Bundle: "b", Data: []byte("kind: ValidatingAdmissionPolicyBinding\n")}).InMode(ModeWarn); err == nil {
		t.Error("a binding without spec: no error")
	}
}
