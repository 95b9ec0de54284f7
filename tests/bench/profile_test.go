package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/pprof/profile"

	"github.com/agentsandbox/reconciler/tests"
)

// profileDir is where each phase's CPU profile of the controller is saved,
// relative to the repository root (.work/ is git-ignored).
const profileDir = ".work/bench-profiles"

// profileChunk is the length of each profile the collector requests. A
// phase is covered by consecutive chunks merged into one profile, so a phase
// of any length fits under the pprof server's write timeout (2 minutes). The
// last chunk runs past the phase's end (its settle() included) by less than
// a chunk: the controller is idle by then, and the phase's CPU-seconds are
// read before. Each chunk costs the controller a little CPU to encode:
// measured on an idle controller, 1 s chunks added 0.004 CPU-s per second,
// 5 s chunks about 0.001.
const profileChunk = 5 // seconds

// profiler collects a CPU profile of the controller over one phase:
// consecutive chunks from its /debug/pprof/profile, from start until stop.
type profiler struct {
	stop chan struct{}
	done chan profileResult
}

type profileResult struct {
	chunks []*profile.Profile
	err    error
}

// startProfile starts collecting from the pprof server at addr.
func startProfile(addr string) *profiler {
	return startProfileOf(func() (*profile.Profile, error) { return fetchProfile(addr, profileChunk) })
}

// startProfileOnceUp is startProfile for a process just started, whose
// pprof server may not listen yet: a refused connection is tried again
// every 5 ms, for up to a minute from now.
func startProfileOnceUp(addr string) *profiler {
	deadline := time.Now().Add(time.Minute)
	return startProfileOf(func() (*profile.Profile, error) {
		for {
			p, err := fetchProfile(addr, profileChunk)
			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
				return p, err
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// startProfileOf starts collecting the chunks fetch returns, one after
// another.
func startProfileOf(fetch func() (*profile.Profile, error)) *profiler {
	p := &profiler{stop: make(chan struct{}), done: make(chan profileResult, 1)}
	go func() {
		var res profileResult
		for {
			chunk, err := fetch()
			if err != nil {
				res.err = err
				break
			}
			res.chunks = append(res.chunks, chunk)
			select {
			case <-p.stop:
				p.done <- res
				return
			default:
			}
		}
		<-p.stop
		p.done <- res
	}()
	return p
}

// finish stops collecting once the chunk in flight is in, merges the chunks
// and writes them to <repo>/.work/bench-profiles/<phase>.pprof. It returns
// the repo-relative path.
func (p *profiler) finish(phase string) (string, error) {
	close(p.stop)
	res := <-p.done
	if res.err != nil {
		return "", fmt.Errorf("profiling %s: %w", phase, res.err)
	}
	merged, err := profile.Merge(res.chunks)
	if err != nil {
		return "", fmt.Errorf("merging the profiles of %s: %w", phase, err)
	}
	var body bytes.Buffer
	if err := merged.Write(&body); err != nil {
		return "", err
	}
	return saveProfileFile(phase+".pprof", body.Bytes())
}

// saveProfileFile writes body to <repo>/.work/bench-profiles/<name>, making
// the directory if need be, and returns the repo-relative path.
func saveProfileFile(name string, body []byte) (string, error) {
	rel := filepath.Join(profileDir, name)
	path := filepath.Join(tests.RepoRoot(), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return rel, os.WriteFile(path, body, 0o644)
}

// fetchProfile requests a CPU profile of seconds from the pprof server.
func fetchProfile(addr string, seconds int) (*profile.Profile, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds)
	body, err := httpGet(ctx, url)
	if err != nil {
		return nil, err
	}
	return profile.ParseData(body)
}

// httpGet returns the body of a GET of url, an error unless it is 200 OK.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	return httpGetWith(ctx, http.DefaultClient, url)
}

// httpGetWith is httpGet sent by hc.
func httpGetWith(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}
