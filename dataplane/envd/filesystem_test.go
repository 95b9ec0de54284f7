package envd

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
)

// Stat reports every field the SDK maps, for a file, a directory and a
// symlink (the link itself, with its target); a missing path is not_found.
func TestStat(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(t, "dir/a.txt", "hello")
	if err := os.Chmod(filepath.Join(e.base, "dir/a.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(e.base, "dir/a.txt"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(e.base, "dir/link")); err != nil {
		t.Fatal(err)
	}
	res, err := e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/dir/a.txt"}))
	if err != nil {
		t.Fatal(err)
	}
	got := res.Msg.GetEntry()
	if got.GetName() != "a.txt" || got.GetType() != fspb.FileType_FILE_TYPE_FILE || got.GetPath() != "/dir/a.txt" ||
		got.GetSize() != 5 || got.GetMode() != 0o640 || got.GetPermissions() != "-rw-r-----" ||
		got.GetOwner() == "" || got.GetGroup() == "" || !got.GetModifiedTime().AsTime().Equal(mtime) || got.SymlinkTarget != nil {
		t.Errorf("file: %v", got)
	}
	res, err = e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/dir"}))
	if err != nil || res.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY || res.Msg.GetEntry().GetPath() != "/dir" {
		t.Errorf("directory: %v %v", res, err)
	}
	res, err = e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/dir/link"}))
	if err != nil || res.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_SYMLINK || res.Msg.GetEntry().GetSymlinkTarget() != "a.txt" {
		t.Errorf("symlink: %v %v", res, err)
	}
	res, err = e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/"}))
	if err != nil || res.Msg.GetEntry().GetPath() != "/" || res.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY {
		t.Errorf("root: %v %v", res, err)
	}
	_, err = e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "/nope"}))
	if code(err) != connect.CodeNotFound {
		t.Errorf("missing: %v, want not_found", err)
	}
}

// ListDir lists one level by default, more with depth, sorted, a
// subdirectory's entries right after it; symlinked directories are not
// entered.
func TestListDirDepth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(t, "p/b.txt", "b")
	e.write(t, "p/a/x.txt", "x")
	e.write(t, "p/a/deeper/y.txt", "y")
	if err := os.Symlink("a", filepath.Join(e.base, "p/c")); err != nil {
		t.Fatal(err)
	}
	paths := func(depth uint32) []string {
		t.Helper()
		res, err := e.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "/p", Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, en := range res.Msg.GetEntries() {
			out = append(out, en.GetPath())
		}
		return out
	}
	if got, want := paths(1), []string{"/p/a", "/p/b.txt", "/p/c"}; !slices.Equal(got, want) {
		t.Errorf("depth 1: %v, want %v", got, want)
	}
	if got, want := paths(0), paths(1); !slices.Equal(got, want) {
		t.Errorf("depth 0: %v, want depth 1's %v", got, want)
	}
	if got, want := paths(2), []string{"/p/a", "/p/a/deeper", "/p/a/x.txt", "/p/b.txt", "/p/c"}; !slices.Equal(got, want) {
		t.Errorf("depth 2: %v, want %v", got, want)
	}
	if got, want := paths(5), []string{"/p/a", "/p/a/deeper", "/p/a/deeper/y.txt", "/p/a/x.txt", "/p/b.txt", "/p/c"}; !slices.Equal(got, want) {
		t.Errorf("depth 5: %v, want %v", got, want)
	}
	_, err := e.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "/p/b.txt"}))
	if code(err) != connect.CodeInvalidArgument {
		t.Errorf("list a file: %v, want invalid_argument", err)
	}
	_, err = e.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: "/missing"}))
	if code(err) != connect.CodeNotFound {
		t.Errorf("list a missing directory: %v, want not_found", err)
	}
}

// Relative paths are under the home directory (E2B's /home/user), which
// New made.
func TestRelativePathsUnderHome(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if st, err := os.Stat(filepath.Join(e.base, "home/user")); err != nil || !st.IsDir() {
		t.Fatalf("home directory: %v", err)
	}
	if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: "project/src"})); err != nil {
		t.Fatal(err)
	}
	res, err := e.fs.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: "project"}))
	if err != nil || res.Msg.GetEntry().GetPath() != "/home/user/project" {
		t.Fatalf("stat relative: %v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(e.base, "home/user/project/src")); err != nil {
		t.Errorf("relative MakeDir did not land under home: %v", err)
	}
	list, err := e.fs.ListDir(ctx, connect.NewRequest(&fspb.ListDirRequest{Path: ""}))
	if err != nil || len(list.Msg.GetEntries()) != 1 || list.Msg.GetEntries()[0].GetPath() != "/home" {
		t.Errorf("an empty path is the root: %v %v", list, err)
	}
}

// MakeDir makes parents and answers already_exists the second time
// (files.makeDir returns false then); Move renames, making the
// destination's directories; Remove deletes a tree and a symlink itself.
func TestMakeDirMoveRemove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: "/a/b/c"}))
	if err != nil || res.Msg.GetEntry().GetPath() != "/a/b/c" || res.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("make dir: %v %v", res, err)
	}
	if _, err := e.fs.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: "/a/b/c/"})); code(err) != connect.CodeAlreadyExists {
		t.Errorf("make dir twice: %v, want already_exists", err)
	}
	e.write(t, "a/b/c/f.txt", "f")
	mv, err := e.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "/a/b/c/f.txt", Destination: "/new/dir/g.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != "/new/dir/g.txt" || mv.Msg.GetEntry().GetName() != "g.txt" {
		t.Fatalf("move: %v %v", mv, err)
	}
	if data, err := os.ReadFile(filepath.Join(e.base, "new/dir/g.txt")); err != nil || string(data) != "f" {
		t.Errorf("moved file: %q %v", data, err)
	}
	if _, err := e.fs.Move(ctx, connect.NewRequest(&fspb.MoveRequest{Source: "/gone", Destination: "/x"})); code(err) != connect.CodeNotFound {
		t.Errorf("move a missing file: %v, want not_found", err)
	}
	keep := filepath.Join(e.base, "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(keep, filepath.Join(e.base, "a/link")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "/a/link"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("removing a symlink removed its target: %v", err)
	}
	if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "/a"})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.base, "a")); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: "/a"})); code(err) != connect.CodeNotFound {
		t.Errorf("remove twice: %v, want not_found", err)
	}
	for _, root := range []string{"/", "", "../..", "/a/../.."} {
		if _, err := e.fs.Remove(ctx, connect.NewRequest(&fspb.RemoveRequest{Path: root})); code(err) != connect.CodeInvalidArgument {
			t.Errorf("remove %q: %v, want invalid_argument", root, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.base, "keep")); err != nil {
		t.Errorf("the root lost its content: %v", err)
	}
}

// WatchDir sends start{} first, then changes named relative to the
// watched directory; with recursive, changes in new subdirectories too.
func TestWatchDir(t *testing.T) {
	e := newEnv(t)
	e.write(t, "w/.keep", "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := e.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "/w", Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if !st.Receive() || st.Msg().GetStart() == nil {
		t.Fatalf("first event %v, %v: want start", st.Msg(), st.Err())
	}
	e.write(t, "w/new.txt", "1")
	if err := os.Mkdir(filepath.Join(e.base, "w/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var entryPath string
	wait := func(key string) {
		t.Helper()
		for !seen[key] {
			if !st.Receive() {
				t.Fatalf("stream ended before %s (seen %v): %v", key, seen, st.Err())
			}
			fe := st.Msg().GetFilesystem()
			if fe == nil {
				continue
			}
			seen[fe.GetName()+" "+fe.GetType().String()] = true
			if fe.GetName() == "new.txt" && fe.GetEntry() != nil {
				entryPath = fe.GetEntry().GetPath()
			}
		}
	}
	wait("new.txt EVENT_TYPE_CREATE")
	// An upload is reported as its file, not as its temporary file.
	if status := e.postRaw(t, "/w/uploaded.txt", "u"); status != http.StatusOK {
		t.Fatalf("upload: %d", status)
	}
	wait("uploaded.txt EVENT_TYPE_CREATE")
	for key := range seen {
		if strings.Contains(key, uploadPrefix) {
			t.Errorf("the upload's temporary file was reported: %s", key)
		}
	}
	wait("sub EVENT_TYPE_CREATE")
	if entryPath != "/w/new.txt" {
		t.Errorf("entry path %q, want /w/new.txt", entryPath)
	}
	// The new subdirectory is watched once its create event is out; a file
	// made in it a moment later is seen.
	time.Sleep(100 * time.Millisecond)
	e.write(t, "w/sub/inner.txt", "2")
	wait("sub/inner.txt EVENT_TYPE_CREATE")
	if err := os.Remove(filepath.Join(e.base, "w/new.txt")); err != nil {
		t.Fatal(err)
	}
	wait("new.txt EVENT_TYPE_REMOVE")

	_, err = e.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "/missing"}))
	if err == nil {
		s2, _ := e.fs.WatchDir(ctx, connect.NewRequest(&fspb.WatchDirRequest{Path: "/missing"}))
		for s2.Receive() {
		}
		err = s2.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Errorf("watch a missing directory: %v, want not_found", err)
	}
}
