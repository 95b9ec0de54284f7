package e2b

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Tokens makes and checks the envdAccessToken of each sandbox: an HMAC
// (SHA-256) under the router's key of the claim's namespace, name and UID.
// Nothing is stored: create, connect and getInfo compute it again, and the
// data plane checks it against the claim it names. It is bound to the
// claim's UID, so a claim deleted and made again under the same name gets
// another token; whoever cannot read the key cannot make one (reading or
// even updating the claim does not help). All replicas of the router must
// share the key; a new key invalidates the tokens of running sandboxes.
type Tokens struct {
	key []byte
}

// minKeyBytes is the shortest key accepted.
const minKeyBytes = 32

// NewTokens returns Tokens with key (at least 32 bytes).
func NewTokens(key []byte) (*Tokens, error) {
	if len(key) < minKeyBytes {
		return nil, fmt.Errorf("the access-token key has %d bytes, want at least %d", len(key), minKeyBytes)
	}
	return &Tokens{key: append([]byte(nil), key...)}, nil
}

// RandomTokens returns Tokens with a random key: tokens die with the
// process (for a single router that may lose running sandboxes' tokens on
// restart, and tests).
func RandomTokens() (*Tokens, error) {
	key := make([]byte, minKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("reading random bytes: %w", err)
	}
	return NewTokens(key)
}

// ReadTokenKey reads a key file: its content without surrounding white
// space.
func ReadTokenKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the access-token key: %w", err)
	}
	key := []byte(strings.TrimSpace(string(b)))
	if len(key) < minKeyBytes {
		return nil, fmt.Errorf("the access-token key in %s has %d bytes, want at least %d (make one: openssl rand -hex 32)", path, len(key), minKeyBytes)
	}
	return key, nil
}

// For is the token of the claim namespace/name with uid.
func (t *Tokens) For(namespace, name string, uid types.UID) string {
	m := hmac.New(sha256.New, t.key)
	// NUL cannot occur in any of the three: the fields cannot run together.
	_, _ = m.Write([]byte("e2b-envd-access\x00" + namespace + "\x00" + name + "\x00" + string(uid)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errTokenMismatch = errors.New("wrong access token")

// Check compares got with the claim's token in constant time.
func (t *Tokens) Check(namespace, name string, uid types.UID, got string) error {
	want := t.For(namespace, name, uid)
	if uid == "" || !hmac.Equal([]byte(want), []byte(got)) {
		return errTokenMismatch
	}
	return nil
}
