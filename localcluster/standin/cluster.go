package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// ClusterFile is the record, in a stand-in's directory (Options.Dir), of the
// local cluster it serves: written when the cluster is created, checked
// when `kubectl-sandbox kubelet` starts.
const ClusterFile = "cluster.json"

// ClusterIdentity is what tells one API server from another: its URL and
// the SHA-256 of the CA its kubeconfig trusts.
type ClusterIdentity struct {
	Server   string `json:"server"`
	CASHA256 string `json:"caSHA256"`
}

// IdentityOf returns the identity of the API server cfg reaches (the CA
// read from its file when the kubeconfig names one).
func IdentityOf(cfg *rest.Config) (ClusterIdentity, error) {
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return ClusterIdentity{}, fmt.Errorf("reading the kubeconfig's CA: %w", err)
	}
	id := ClusterIdentity{Server: strings.TrimRight(strings.ToLower(c.Host), "/")}
	if len(c.CAData) > 0 {
		sum := sha256.Sum256(c.CAData)
		id.CASHA256 = hex.EncodeToString(sum[:])
	}
	return id, nil
}

// RecordCluster records cfg's API server as the cluster whose sandbox Pods
// the stand-in with directory dir runs.
func RecordCluster(dir string, cfg *rest.Config) error {
	id, err := IdentityOf(cfg)
	if err != nil {
		return err
	}
	data, err := json.Marshal(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ClusterFile), data, 0o600); err != nil {
		return fmt.Errorf("recording the local cluster: %w", err)
	}
	return nil
}

// CheckCluster refuses a cfg that does not reach the local cluster recorded
// in dir (RecordCluster), or whose API server is not on this machine: the
// stand-in runs every sandbox Pod of the cluster it watches as a process on
// this machine, so pointed at a shared cluster it would run anyone's code
// here.
func CheckCluster(dir string, cfg *rest.Config) error {
	got, err := IdentityOf(cfg)
	if err != nil {
		return err
	}
	if !loopbackServer(got.Server) {
		return fmt.Errorf("the kubeconfig's API server %s is not on this machine: the stand-in kubelet runs every sandbox Pod of its cluster as a process here, so it serves only the local cluster `kubectl sandbox up` made", got.Server)
	}
	path := filepath.Join(dir, ClusterFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s is missing: the stand-in kubelet serves only the local cluster `kubectl sandbox up` made, which records its API server there", path)
	} else if err != nil {
		return err
	}
	var want ClusterIdentity
	if err := json.Unmarshal(data, &want); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if got != want {
		what := "its CA"
		if got.Server != want.Server {
			what = "its URL"
		}
		return fmt.Errorf("the kubeconfig's API server %s is not the local cluster this stand-in was started for (%s, recorded in %s): %s differs",
			got.Server, want.Server, path, what)
	}
	return nil
}

// loopbackServer reports whether an API server URL names this machine.
func loopbackServer(server string) bool {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
