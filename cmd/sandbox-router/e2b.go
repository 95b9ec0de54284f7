package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/e2b"
	"github.com/agentsandbox/reconciler/dataplane/resume"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// e2bOptions are the flags of the E2B front door.
type e2bOptions struct {
	enabled              bool
	auth, namespace      string
	tokenKeyFile, envd   string
	keyNamespace         string
	readyTimeout, maxTTL time.Duration
}

func (o *e2bOptions) bind(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "e2b", false, "Serve the E2B API on the proxy port too: requests with E2b-Sandbox-Id go to that sandbox (data plane), requests without either header under /sandboxes or /v2/sandboxes are the E2B control plane (sandboxes are SandboxClaims); the rest is answered as without --e2b. Needs the rights of config/router/e2b.")
	fs.StringVar(&o.auth, "e2b-auth", "", "How the E2B control plane checks X-API-KEY: tokenreview (a Kubernetes bearer token; each call's rights on sandboxclaims, and sandboxes/exec, by SubjectAccessReview) or none (any non-empty key, sandboxes in --e2b-namespace; only where the network already limits who reaches the router). Empty: as --auth.")
	fs.StringVar(&o.namespace, "e2b-namespace", "default", "Namespace of the E2B sandboxes of callers that are not ServiceAccounts (a ServiceAccount's live in its own namespace), and of every caller with --e2b-auth=none.")
	fs.StringVar(&o.tokenKeyFile, "e2b-token-key-file", "", "File holding the key (at least 32 bytes; e.g. openssl rand -hex 32) that envdAccessTokens are made with (HMAC of the claim's namespace, name and UID). Every replica needs the same key; a new key invalidates running sandboxes' tokens. Empty: a random key per process (tokens die with it).")
	fs.StringVar(&o.envd, "e2b-envd-version", e2b.DefaultEnvdVersion, "The envdVersion reported to the SDK, which turns features on by it: report only a version whose features the sandbox runtime serves.")
	fs.StringVar(&o.keyNamespace, "e2b-api-key-namespace", "", "Also take API keys kept in Secrets of this namespace (labelled "+e2b.LabelAPIKey+"=true; data key-sha256: the key's hex SHA-256, namespace: its sandboxes' namespace, username and optional groups: the identity SubjectAccessReviews ask about); the router then lists and watches those Secrets (config/router/e2b/api-keys.yaml). Needs --e2b-auth=tokenreview. Empty: bearer tokens only.")
	fs.DurationVar(&o.readyTimeout, "e2b-ready-timeout", 2*time.Minute, "How long create and connect wait for a sandbox to be ready, and pause for its Pod to stop.")
	fs.DurationVar(&o.maxTTL, "e2b-max-sandbox-timeout", 24*time.Hour, "Longest timeout a sandbox may ask for (create, connect, setTimeout).")
}

func (o *e2bOptions) validate(auth string) error {
	var errs []error
	if o.auth == "" {
		o.auth = auth
	}
	if o.auth != "none" && o.auth != "tokenreview" {
		errs = append(errs, fmt.Errorf("--e2b-auth=%q: want tokenreview or none", o.auth))
	}
	if len(validation.IsDNS1123Label(o.namespace)) > 0 {
		errs = append(errs, fmt.Errorf("--e2b-namespace=%q is not a namespace name", o.namespace))
	}
	if !versionPattern.MatchString(o.envd) {
		errs = append(errs, fmt.Errorf("--e2b-envd-version=%q is not a semantic version", o.envd))
	}
	if o.keyNamespace != "" && (len(validation.IsDNS1123Label(o.keyNamespace)) > 0 || o.auth != "tokenreview") {
		errs = append(errs, fmt.Errorf("--e2b-api-key-namespace=%q: must be a namespace name, with --e2b-auth=tokenreview", o.keyNamespace))
	}
	if o.readyTimeout <= 0 || o.maxTTL <= 0 {
		errs = append(errs, errors.New("--e2b-ready-timeout and --e2b-max-sandbox-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// versionPattern is a release version (major.minor.patch).
var versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// e2bFront builds the E2B front door around the router's handler, and
// the cache of API key Secrets it reads (nil without
// --e2b-api-key-namespace), for the caller to start.
func e2bFront(o e2bOptions, cfg *rest.Config, cache client.Reader, proxy *router.Handler, tr *router.TokenReview,
	limits router.Limits, resolveWait time.Duration, changes *router.Changes, log logr.Logger) (http.Handler, ctrlcache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := extv1beta1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := sandboxv1beta1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("e2b: client: %w", err)
	}
	sandboxes, err := resume.NewREST(cfg, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("e2b: sandbox client: %w", err)
	}
	var tokens *e2b.Tokens
	if o.tokenKeyFile != "" {
		key, err := e2b.ReadTokenKey(o.tokenKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--e2b-token-key-file: %w", err)
		}
		tokens, err = e2b.NewTokens(key)
		if err != nil {
			return nil, nil, err
		}
	} else {
		log.Info("--e2b-token-key-file not set: envdAccessTokens are made with a random key, and stop working when this process ends")
		if tokens, err = e2b.RandomTokens(); err != nil {
			return nil, nil, err
		}
	}
	eo := e2b.Options{Client: cl, Cache: cache, Sandboxes: sandboxes, Proxy: proxy, DefaultNamespace: o.namespace,
		Tokens: tokens, EnvdVersion: o.envd, ReadyTimeout: o.readyTimeout, MaxSandboxTimeout: o.maxTTL,
		ResolveWait: resolveWait, Changes: changes, MaxRequestTimeout: limits.MaxTimeout, Log: log.WithName("e2b")}
	var keyCache ctrlcache.Cache
	if o.keyNamespace != "" {
		sel := labels.SelectorFromSet(labels.Set{e2b.LabelAPIKey: "true"})
		keyCache, err = ctrlcache.New(cfg, ctrlcache.Options{Scheme: clientgoscheme.Scheme, ReaderFailOnMissingInformer: true,
			DefaultNamespaces: map[string]ctrlcache.Config{o.keyNamespace: {}},
			ByObject:          map[client.Object]ctrlcache.ByObject{&corev1.Secret{}: {Label: sel}}})
		if err != nil {
			return nil, nil, fmt.Errorf("e2b: API key cache: %w", err)
		}
		if _, err := keyCache.GetInformer(context.Background(), &corev1.Secret{}); err != nil {
			return nil, nil, fmt.Errorf("e2b: API key cache: %w", err)
		}
		eo.Keys = &e2b.KeySecrets{Reader: keyCache, Namespace: o.keyNamespace}
	}
	if o.auth == "tokenreview" {
		eo.Auth = tr
	} else {
		log.Info("--e2b-auth=none: any non-empty X-API-KEY creates and controls sandboxes in " + o.namespace)
	}
	return e2b.New(eo).Front(proxy), keyCache, nil
}
