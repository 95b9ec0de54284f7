package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// API keys kept in Secrets (--e2b-api-key-namespace): a Secret in that
// namespace labelled LabelAPIKey=true names one key by its SHA-256 and the
// identity it acts as, in its data:
//
//	key-sha256: hex SHA-256 of the key (the key itself is never stored)
//	namespace:  the namespace of the key's sandboxes
//	username:   the user the SubjectAccessReviews ask about
//	groups:     optional, comma-separated groups of that user
const (
	LabelAPIKey         = "e2b.agents.x-k8s.io/api-key"
	KeyDataHash         = "key-sha256"
	KeyDataNamespace    = "namespace"
	KeyDataUsername     = "username"
	KeyDataGroups       = "groups"
	keyHashHexLength    = 2 * sha256.Size
	keySecretsListLimit = 10000
)

// KeySecrets looks API keys up in the labelled Secrets of one namespace.
type KeySecrets struct {
	// Reader reads the Secrets (a cache limited to Namespace and the
	// label, so that the router holds no other Secret).
	Reader client.Reader
	// Namespace holds the Secrets.
	Namespace string
}

// lookup returns the identity and namespace of key, found false when no
// Secret names it. Every Secret's hash is compared in constant time.
func (k *KeySecrets) lookup(ctx context.Context, key string) (*authenticationv1.UserInfo, string, bool, error) {
	var secrets corev1.SecretList
	if err := k.Reader.List(ctx, &secrets, client.InNamespace(k.Namespace), client.MatchingLabels{LabelAPIKey: "true"},
		client.Limit(keySecretsListLimit)); err != nil {
		return nil, "", false, fmt.Errorf("listing API key Secrets: %w", err)
	}
	sum := sha256.Sum256([]byte(key))
	want := []byte(hex.EncodeToString(sum[:]))
	var match *corev1.Secret
	for i := range secrets.Items {
		got := []byte(strings.ToLower(strings.TrimSpace(string(secrets.Items[i].Data[KeyDataHash]))))
		if len(got) == keyHashHexLength && subtle.ConstantTimeCompare(got, want) == 1 && match == nil {
			match = &secrets.Items[i]
		}
	}
	if match == nil {
		return nil, "", false, nil
	}
	ns := strings.TrimSpace(string(match.Data[KeyDataNamespace]))
	user := strings.TrimSpace(string(match.Data[KeyDataUsername]))
	if len(validation.IsDNS1123Label(ns)) > 0 || user == "" {
		return nil, "", false, fmt.Errorf("API key Secret %s/%s: %s must be a namespace and %s a user name", match.Namespace, match.Name, KeyDataNamespace, KeyDataUsername)
	}
	info := &authenticationv1.UserInfo{Username: user}
	for _, g := range strings.Split(string(match.Data[KeyDataGroups]), ",") {
		if g = strings.TrimSpace(g); g != "" {
			info.Groups = append(info.Groups, g)
		}
	}
	return info, ns, true, nil
}
