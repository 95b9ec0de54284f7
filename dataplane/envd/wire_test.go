package envd

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// These tests send exactly what the e2b npm SDK sends (shared/E2B.md: the
// Connect protocol with the JSON codec over HTTP/1.1) and check the bytes
// that come back, without the generated client.

// unary POSTs body to path as the SDK does and returns status, content
// type and the body decoded as JSON.
func (e *env) unary(t *testing.T, path, body string) (int, string, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", "60000")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", path, raw, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// frame is one envelope of a streaming body.
type frame struct {
	flags byte
	data  map[string]any
}

// stream POSTs one enveloped JSON message to path as the SDK does and
// returns the reply's content type and envelopes.
func (e *env) stream(t *testing.T, path, body string) (string, []frame) {
	t.Helper()
	return e.streamWithin(t, path, body, "60000")
}

// streamWithin is stream with Connect-Timeout-Ms set to timeoutMs.
func (e *env) streamWithin(t *testing.T, path, body, timeoutMs string) (string, []frame) {
	t.Helper()
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.WriteString(body)
	req, _ := http.NewRequest(http.MethodPost, e.url+path, &env)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("Connect-Timeout-Ms", timeoutMs)
	req.Header.Set("Keepalive-Ping-Interval", "50")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	var frames []frame
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: reading an envelope: %v", path, err)
		}
		data := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		f := frame{flags: hdr[0]}
		if err := json.Unmarshal(data, &f.data); err != nil {
			t.Fatalf("%s: envelope %q is not JSON: %v", path, data, err)
		}
		frames = append(frames, f)
	}
	return resp.Header.Get("Content-Type"), frames
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// commands.run("echo hi") on the wire: start, data (base64 stdout), end,
// then the end-of-stream frame (flag 0x02) holding {}.
func TestWireStartStream(t *testing.T) {
	e := newEnv(t)
	ct, frames := e.stream(t, "/process.Process/Start",
		`{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi; exit 2"],"envs":{}},"stdin":false}`)
	if ct != "application/connect+json" {
		t.Errorf("content type %q", ct)
	}
	if len(frames) < 4 {
		t.Fatalf("frames %v", frames)
	}
	pid, ok := frames[0].data["event"].(map[string]any)["start"].(map[string]any)["pid"].(float64)
	if !ok || pid <= 0 || frames[0].flags != 0 {
		t.Errorf("first frame %v: want {event: {start: {pid}}}", frames[0].data)
	}
	var stdout string
	for _, f := range frames[1 : len(frames)-2] {
		d := f.data["event"].(map[string]any)["data"].(map[string]any)
		b, err := base64.StdEncoding.DecodeString(d["stdout"].(string))
		if err != nil {
			t.Fatal(err)
		}
		stdout += string(b)
	}
	if stdout != "hi\n" {
		t.Errorf("stdout %q", stdout)
	}
	end := frames[len(frames)-2]
	if got, want := jsonOf(end.data), `{"event":{"end":{"error":"exit status 2","exitCode":2,"exited":true,"status":"exit status 2"}}}`; got != want {
		t.Errorf("end frame %s, want %s", got, want)
	}
	last := frames[len(frames)-1]
	if last.flags != 0x02 || jsonOf(last.data) != `{}` {
		t.Errorf("end-of-stream frame: flags %#x %v, want 0x02 {}", last.flags, last.data)
	}
}

// A stream's error comes in the end-of-stream frame, with the code as a
// string.
func TestWireStreamError(t *testing.T) {
	e := newEnv(t)
	_, frames := e.stream(t, "/process.Process/Connect", `{"process":{"pid":999999}}`)
	if len(frames) != 1 || frames[0].flags != 0x02 {
		t.Fatalf("frames %v", frames)
	}
	errObj, _ := frames[0].data["error"].(map[string]any)
	if errObj["code"] != "not_found" || !strings.Contains(errObj["message"].(string), "999999") {
		t.Errorf("end frame %v, want error not_found", frames[0].data)
	}
}

// A stream cut by the client's Connect-Timeout-Ms (the SDK's timeoutMs)
// ends with deadline_exceeded, which the SDK turns into its TimeoutError;
// the program goes on (as a background command would).
func TestWireStreamTimeout(t *testing.T) {
	e := newEnv(t)
	_, frames := e.streamWithin(t, "/process.Process/Start", `{"process":{"cmd":"/bin/bash","args":["-l","-c","sleep 3"]}}`, "300")
	last := frames[len(frames)-1]
	errObj, _ := last.data["error"].(map[string]any)
	if last.flags != 0x02 || errObj["code"] != "deadline_exceeded" {
		t.Fatalf("frames %v: want an end frame with deadline_exceeded", frames)
	}
	_, _, body := e.unary(t, "/process.Process/List", `{}`)
	if procs, _ := body["processes"].([]any); len(procs) != 1 {
		t.Errorf("list after the timeout: %v, want the program still running", body)
	}
}

// files.watchDir on the wire: the first envelope is {"start":{}}.
func TestWireWatchDirStart(t *testing.T) {
	e := newEnv(t)
	body := `{"path":"/","recursive":false,"includeEntry":false,"allowNetworkMounts":false}`
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(body)))
	env.WriteString(body)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/filesystem.Filesystem/WatchDir", &env)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	want := `{"start":{}}`
	got := make([]byte, 5+len(want))
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || binary.BigEndian.Uint32(got[1:5]) != uint32(len(want)) || string(got[5:]) != want {
		t.Errorf("first envelope %q, want %q", got, want)
	}
}

// files.getInfo on the wire: camelCase fields, enum names, int64 size as
// a string, RFC 3339 modifiedTime; a missing path is 404
// {"code":"not_found"} and exists() reads that as false.
func TestWireStatAndErrors(t *testing.T) {
	e := newEnv(t)
	e.write(t, "home/user/a.txt", "hello")
	status, ct, body := e.unary(t, "/filesystem.Filesystem/Stat", `{"path":"/home/user/a.txt"}`)
	if status != http.StatusOK || ct != "application/json" {
		t.Fatalf("status %d %q: %v", status, ct, body)
	}
	entry := body["entry"].(map[string]any)
	for k, want := range map[string]any{"name": "a.txt", "type": "FILE_TYPE_FILE", "path": "/home/user/a.txt", "size": "5", "mode": float64(0o644), "permissions": "-rw-r--r--"} {
		if entry[k] != want {
			t.Errorf("%s = %#v, want %#v", k, entry[k], want)
		}
	}
	for _, k := range []string{"owner", "group", "modifiedTime"} {
		if s, _ := entry[k].(string); s == "" {
			t.Errorf("%s missing: %v", k, entry)
		}
	}
	if mt := entry["modifiedTime"].(string); !strings.HasSuffix(mt, "Z") || !strings.Contains(mt, "T") {
		t.Errorf("modifiedTime %q: want RFC 3339 in UTC", mt)
	}
	status, _, body = e.unary(t, "/filesystem.Filesystem/Stat", `{"path":"/home/user/missing"}`)
	if status != http.StatusNotFound || body["code"] != "not_found" {
		t.Errorf("missing: %d %v", status, body)
	}
	status, _, body = e.unary(t, "/filesystem.Filesystem/MakeDir", `{"path":"/home/user"}`)
	if status != http.StatusConflict || body["code"] != "already_exists" {
		t.Errorf("make an existing dir: %d %v", status, body)
	}
	status, _, body = e.unary(t, "/filesystem.Filesystem/ListDir", `{"path":"/home","depth":1}`)
	if status != http.StatusOK || jsonOf(body["entries"].([]any)[0].(map[string]any)["type"]) != `"FILE_TYPE_DIRECTORY"` {
		t.Errorf("list: %d %v", status, body)
	}
	status, _, body = e.unary(t, "/process.Process/SendSignal", `{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}`)
	if status != http.StatusNotFound || body["code"] != "not_found" {
		t.Errorf("kill an unknown pid: %d %v", status, body)
	}
	status, _, body = e.unary(t, "/process.Process/List", `{}`)
	if status != http.StatusOK || jsonOf(body) != `{}` {
		t.Errorf("list with nothing running: %d %s, want {}", status, jsonOf(body))
	}
	// Fields a newer SDK adds are ignored, not refused.
	status, _, body = e.unary(t, "/filesystem.Filesystem/Stat", `{"path":"/home/user/a.txt","someNewField":1}`)
	if status != http.StatusOK || body["entry"] == nil {
		t.Errorf("unknown field: %d %v", status, body)
	}
}

// files.write and files.read on the wire: a multipart part "file" named by
// its path, a raw octet-stream body, the reply [{name, type, path}], the
// bytes back, 404 JSON for a missing file; /health is 204.
func TestWireFilesAndHealth(t *testing.T) {
	e := newEnv(t)
	if status := e.postMultipart(t, "/home/user/hello.txt", map[string]string{"/home/user/hello.txt": "multipart body"}); status != http.StatusOK {
		t.Fatalf("multipart write: %d", status)
	}
	if status, body := e.get(t, "/home/user/hello.txt"); status != http.StatusOK || body != "multipart body" {
		t.Errorf("read: %d %q", status, body)
	}
	resp, err := http.Post(e.url+"/files?path=%2Fhome%2Fuser%2Fraw.bin&username=user", "application/octet-stream", strings.NewReader("\x00\x01raw"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(raw)) != `[{"name":"raw.bin","type":"file","path":"/home/user/raw.bin"}]` {
		t.Errorf("octet-stream write: %d %s", resp.StatusCode, raw)
	}
	if status, body := e.get(t, "raw.bin"); status != http.StatusOK || body != "\x00\x01raw" { // relative: under /home/user
		t.Errorf("read raw: %d %q", status, body)
	}
	// Several files in one multipart body, no path parameter: each part's
	// filename is its path.
	if status := e.postMultipart(t, "", map[string]string{"/a/one.txt": "1", "b/two.txt": "2"}); status != http.StatusOK {
		t.Errorf("multi-file write: %d", status)
	}
	for p, want := range map[string]string{"/a/one.txt": "1", "/home/user/b/two.txt": "2"} {
		if status, body := e.get(t, p); status != http.StatusOK || body != want {
			t.Errorf("read %s: %d %q", p, status, body)
		}
	}
	// An empty file comes back with Content-Length 0 (the SDK's empty read).
	e.write(t, "empty", "")
	resp, err = http.Get(e.url + "/files?path=/empty")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != "0" {
		t.Errorf("empty file: %d, Content-Length %q", resp.StatusCode, resp.Header.Get("Content-Length"))
	}
	status, body := e.get(t, "/nope.txt")
	var errBody map[string]any
	if status != http.StatusNotFound || json.Unmarshal([]byte(body), &errBody) != nil || errBody["code"] != float64(404) || errBody["message"] == "" {
		t.Errorf("missing file: %d %s", status, body)
	}
	if status, _ := e.get(t, "/a"); status != http.StatusBadRequest {
		t.Errorf("read a directory: %d, want 400", status)
	}
	resp, err = http.Get(e.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("health: %d", resp.StatusCode)
	}
}
