package envtest

import "testing"

func TestNamespacePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"TestApply/Sandbox":                      "testapply-sandbox-",
		"TestX/unset_to_set":                     "testx-unset-to-set-",
		"__":                                     "t-",
		"TestAVeryLongNameThatKeepsGoingOnAndOn": "testaverylongnamethatkeepsgoingonandon-",
		"TestAVeryLongNameThatKeepsGoingOnAndOnAndOnAndOn": "testaverylongnamethatkeepsgoingonandonan-",
	} {
		if got := NamespacePrefix(in); got != want {
			t.Errorf("NamespacePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
