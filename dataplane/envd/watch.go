package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	fspb "github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
)

// maxWatchedDirs bounds one recursive watch (inotify watches are a
// per-user kernel resource).
const maxWatchedDirs = 4096

// WatchDir streams start{}, then every change in a directory (with
// recursive, in its subdirectories too, new ones included) as
// {name (relative to the directory), type, entry?}, with keepalives while
// quiet, until the client goes away.
func (s *filesystemService) WatchDir(ctx context.Context, req *connect.Request[fspb.WatchDirRequest], stream *connect.ServerStream[fspb.WatchDirResponse]) error {
	p := s.opts.abs(req.Msg.GetPath())
	root, err := resolve(s.opts.BaseDir, p)
	if err != nil {
		return pathError("watch", p, err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return pathError("watch", p, err)
	}
	if !st.IsDir() {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("watch %s: not a directory", quote(p)))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: %w", quote(p), err))
	}
	defer func() { _ = w.Close() }()
	recursive := req.Msg.GetRecursive()
	watched := 0
	add := func(dir string) error {
		if !recursive {
			watched++
			return w.Add(dir)
		}
		return filepath.WalkDir(dir, func(sub string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil // gone, unreadable, or not a directory
			}
			if watched++; watched > maxWatchedDirs {
				return fmt.Errorf("more than %d directories", maxWatchedDirs)
			}
			return w.Add(sub)
		})
	}
	if err := add(root); err != nil {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("watch %s: %w", quote(p), err))
	}
	if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Start{Start: &fspb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	var tick <-chan time.Time
	if d := keepaliveInterval(req.Header()); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	clientRoot := clean(p)
	for {
		select {
		case <-ctx.Done():
			return ctxError(ctx)
		case <-tick:
			if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Keepalive{Keepalive: &fspb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		case err := <-w.Errors:
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				continue // some events were lost; the watch goes on
			}
			return connect.NewError(connect.CodeInternal, fmt.Errorf("watch %s: %w", quote(p), err))
		case ev, open := <-w.Events:
			if !open {
				return nil
			}
			rel, err := filepath.Rel(root, ev.Name)
			if err != nil || rel == "." || strings.HasPrefix(filepath.Base(ev.Name), uploadPrefix) {
				continue // an upload's temporary file: its rename into place is reported
			}
			if recursive && ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					_ = add(ev.Name) // best effort: a directory gone again, or over the bound
				}
			}
			for _, t := range eventTypes(ev.Op) {
				fe := &fspb.FilesystemEvent{Name: filepath.ToSlash(rel), Type: t}
				if req.Msg.GetIncludeEntry() {
					if e, err := entryInfo(joinClient(clientRoot, rel), ev.Name); err == nil {
						fe.Entry = e
					}
				}
				if err := stream.Send(&fspb.WatchDirResponse{Event: &fspb.WatchDirResponse_Filesystem{Filesystem: fe}}); err != nil {
					return err
				}
			}
		}
	}
}

// eventTypes maps an fsnotify operation (possibly several at once) to E2B's
// event types.
func eventTypes(op fsnotify.Op) []fspb.EventType {
	var out []fspb.EventType
	for _, m := range []struct {
		op fsnotify.Op
		t  fspb.EventType
	}{
		{fsnotify.Create, fspb.EventType_EVENT_TYPE_CREATE},
		{fsnotify.Write, fspb.EventType_EVENT_TYPE_WRITE},
		{fsnotify.Remove, fspb.EventType_EVENT_TYPE_REMOVE},
		{fsnotify.Rename, fspb.EventType_EVENT_TYPE_RENAME},
		{fsnotify.Chmod, fspb.EventType_EVENT_TYPE_CHMOD},
	} {
		if op.Has(m.op) {
			out = append(out, m.t)
		}
	}
	return out
}
