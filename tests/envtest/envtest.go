package envtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	extv1alpha1 "github.com/agentsandbox/reconciler/api/extensions/v1alpha1"
	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1alpha1 "github.com/agentsandbox/reconciler/api/v1alpha1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

// Env is a running API server with the CRDs installed.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client (no cache) with our types registered.
	Client client.Client
	// Scheme has client-go's and our types.
	Scheme *runtime.Scheme

	env *crenvtest.Environment
}

// Scheme returns a scheme with client-go's built-in types and ours.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, sandboxv1beta1.AddToScheme, extv1beta1.AddToScheme,
		apiextensionsv1.AddToScheme, sandboxv1alpha1.AddToScheme, extv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Start starts etcd and kube-apiserver and installs the CRDs from config/crd.
func Start() (*Env, error) {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := tests.Binary(b); err != nil {
			return nil, err
		}
	}
	scheme := Scheme()
	env := &crenvtest.Environment{
		BinaryAssetsDirectory: tests.BinDir(),
		CRDDirectoryPaths:     []string{tests.CRDDir()},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest (kube-apiserver + etcd from %s): %w", tests.BinDir(), err)
	}
	// Tests create many objects quickly; the default client-side limits would
	// only slow them down.
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Kubeconfig writes an admin kubeconfig for the API server into a temporary
// file that lives as long as the test, and returns its path (for kubectl).
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	user, err := e.env.AddUser(crenvtest.User{Name: "test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding envtest user: %v", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// Main is a TestMain body: it starts an Env, stores it in *out, runs the
// optional setup functions (which may return a stop function, e.g. a
// controller manager), runs the package's tests and stops everything. A start
// failure fails the whole package.
//
//	var env *envtest.Env
//	func TestMain(m *testing.M) { envtest.Main(m, &env) }
func Main(m *testing.M, out **Env, setup ...func(*Env) (stop func(), err error)) {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	*out = e
	var stops []func()
	for _, s := range setup {
		stop, err := s(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "envtest: setup:", err)
			_ = e.Stop()
			os.Exit(1)
		}
		stops = append(stops, stop)
	}
	code := m.Run()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest: stopping:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Namespace creates a namespace for one test and deletes it when the test
// ends. Its name is derived from the test name, so failures are easy to find.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: NamespacePrefix(t.Name())}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// envtest runs no namespace controller, so the namespace stays
		// Terminating; deleting it still keeps later listings honest.
		_ = e.Client.Delete(ctx, ns)
	})
	return ns.Name
}

// NamespacePrefix turns a test name into a valid generateName prefix.
func NamespacePrefix(testName string) string {
	b := make([]byte, 0, len(testName))
	for i := 0; i < len(testName) && len(b) < 40; i++ {
		c := testName[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		case c >= 'A' && c <= 'Z':
			b = append(b, c+('a'-'A'))
		case len(b) > 0 && b[len(b)-1] != '-':
			b = append(b, '-')
		}
	}
	for len(b) > 0 && b[len(b)-1] == '-' {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		b = append(b, 't')
	}
	return string(b) + "-"
}

// Eventually calls check every 50 ms until it returns nil, and fails the
// test with what and check's last error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
