package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// forward opens a client-go port-forward (SPDY, through the API server's
// pods/portforward, as the router and the SDK do) to port 8888 of a Pod on a
// free local port, and returns the runtime's base URL. It retries until a
// request gets through: the Pod is Ready before the stand-in has started its
// runtime and kwok has seen the PortForward object.
func forward(t *testing.T, cfg *rest.Config, ns, pod string) string {
	t.Helper()
	var base string
	waitFor(t, time.Minute, "port-forward to "+pod+" answering", func() error {
		b, stop, err := openForward(cfg, ns, pod)
		if err != nil {
			return err
		}
		resp, err := http.Get(b + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				base = b
				t.Cleanup(stop)
				return nil
			}
			err = fmt.Errorf("GET / through the port-forward: %s", resp.Status)
		}
		stop()
		return err
	})
	return base
}

func openForward(cfg *rest.Config, ns, pod string) (string, func(), error) {
	local, stop, err := openForwardPorts(cfg, ns, pod, standin.RuntimePort)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("http://127.0.0.1:%d", local[standin.RuntimePort]), stop, nil
}

// openForwardPorts opens one client-go port-forward to several ports of a
// Pod, each on a free local port, and returns the local port of each.
func openForwardPorts(cfg *rest.Config, ns, pod string, podPorts ...int) (map[int]int, func(), error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	specs := make([]string, len(podPorts))
	for i, p := range podPorts {
		specs[i] = "0:" + strconv.Itoa(p)
	}
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stopCh, readyCh, io.Discard, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	errCh := make(chan error, 1)
	go func() { errCh <- pf.ForwardPorts() }()
	select {
	case <-readyCh:
	case err := <-errCh:
		return nil, nil, fmt.Errorf("port-forward: %w", err)
	case <-time.After(30 * time.Second):
		close(stopCh)
		return nil, nil, fmt.Errorf("port-forward not ready after 30s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != len(podPorts) {
		close(stopCh)
		return nil, nil, fmt.Errorf("port-forward ports %v: %w", ports, err)
	}
	local := map[int]int{}
	for _, p := range ports {
		local[int(p.Remote)] = int(p.Local)
	}
	return local, func() { close(stopCh) }, nil
}

type executeResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
}

// execute runs a command through the runtime's POST /execute.
func execute(base, command string) (executeResponse, error) {
	var out executeResponse
	body, _ := json.Marshal(map[string]string{"command": command})
	resp, err := http.Post(base+"/execute", "application/json", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("POST /execute: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// upload sends a file as upstream's SDKs do: multipart, field "file".
func upload(base, name, content string) error {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	part, err := w.CreateFormFile("file", name)
	if err != nil {
		return err
	}
	_, _ = io.WriteString(part, content)
	if err := w.Close(); err != nil {
		return err
	}
	resp, err := http.Post(base+"/upload", w.FormDataContentType(), &body)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST /upload: %s: %s", resp.Status, msg)
	}
	return nil
}

func download(base, name string) (string, error) {
	resp, err := http.Get(base + "/download/" + url.PathEscape(name))
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /download/%s: %s: %s", name, resp.Status, data)
	}
	return string(data), nil
}

// runtimeState reads the stand-in's record of a Sandbox.
func runtimeState(t *testing.T, ns, name string) standin.State {
	t.Helper()
	var st standin.State
	data, err := os.ReadFile(filepath.Join(standin.SandboxDir(standIn.Dir, standin.Key{Namespace: ns, Name: name}), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// processRuns reports whether pid is a live process (not a zombie).
func processRuns(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i > 0 && i+2 < len(data) && data[i+2] != 'Z'
}

// kubectl runs /usr/bin/kubectl (or the one on PATH) against the cluster
// of a kubeconfig and returns its output.
func kubectl(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	bin := "/usr/bin/kubectl"
	if _, err := os.Stat(bin); err != nil {
		bin = "kubectl"
	}
	cmd := execCommand(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}
