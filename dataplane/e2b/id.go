package e2b

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A sandbox ID names the SandboxClaim behind it: "<namespace>--<suffix>",
// where the claim is "e2b-<suffix>" in that namespace and the suffix is
// suffixLength characters of [a-z0-9]. A data-plane request carries only
// the ID, so the namespace must be in it; the suffix has no hyphen, so the
// last "--" splits the two without doubt (a namespace may hold "--").
const (
	claimPrefix  = "e2b-"
	idSeparator  = "--"
	suffixLength = 12
	suffixChars  = "abcdefghijklmnopqrstuvwxyz0123456789"
	// maxIDLength bounds an ID: a namespace (63) and the rest.
	maxIDLength = validation.DNS1123LabelMaxLength + len(idSeparator) + suffixLength
)

var errBadID = errors.New("not a sandbox ID of this router")

// newSuffix is a random claim suffix (36^12: about 62 bits).
func newSuffix() (string, error) {
	b := make([]byte, suffixLength)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	for i := range b {
		b[i] = suffixChars[int(b[i])%len(suffixChars)]
	}
	return string(b), nil
}

// SandboxID is the ID of the claim namespace/claimName (made by this
// package: "e2b-<suffix>"), or an error for any other claim.
func SandboxID(namespace, claimName string) (string, error) {
	suffix, ok := strings.CutPrefix(claimName, claimPrefix)
	if !ok || !validSuffix(suffix) || len(validation.IsDNS1123Label(namespace)) > 0 {
		return "", errBadID
	}
	return namespace + idSeparator + suffix, nil
}

// ParseID returns the namespace and claim name an ID names. It accepts
// exactly what SandboxID makes: anything else (another separator, a path,
// upper case, a bad namespace) is an error, so that no ID can name an
// object SandboxID would not have named.
func ParseID(id string) (namespace, claimName string, err error) {
	if id == "" || len(id) > maxIDLength {
		return "", "", errBadID
	}
	i := strings.LastIndex(id, idSeparator)
	if i <= 0 {
		return "", "", errBadID
	}
	namespace, suffix := id[:i], id[i+len(idSeparator):]
	if !validSuffix(suffix) || len(validation.IsDNS1123Label(namespace)) > 0 {
		return "", "", errBadID
	}
	return namespace, claimPrefix + suffix, nil
}

func validSuffix(s string) bool {
	if len(s) != suffixLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(suffixChars, rune(s[i])) {
			return false
		}
	}
	return true
}
