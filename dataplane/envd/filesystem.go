package envd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"connectrpc.com/connect"

	fspb "github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb/filesystempbconnect"
)

// maxListEntries bounds one ListDir answer (a deep listing of a big tree).
const maxListEntries = 100_000

// filesystemService is filesystem.Filesystem.
type filesystemService struct {
	filesystempbconnect.UnimplementedFilesystemHandler
	opts Options
}

// Stat describes an entry (a symlink itself, not its target).
func (s *filesystemService) Stat(_ context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	p := s.opts.abs(req.Msg.GetPath())
	real, err := resolveEntry(s.opts.BaseDir, p)
	if err != nil {
		return nil, pathError("stat", p, err)
	}
	e, err := entryInfo(clean(p), real)
	if err != nil {
		return nil, pathError("stat", p, err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: e}), nil
}

// ListDir lists a directory's entries, and with depth > 1 those of its
// subdirectories (not followed through symlinks) down to that many levels,
// each directory's entries sorted by name, a subdirectory's right after it.
func (s *filesystemService) ListDir(_ context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	p := s.opts.abs(req.Msg.GetPath())
	real, err := resolve(s.opts.BaseDir, p)
	if err != nil {
		return nil, pathError("list", p, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, pathError("list", p, err)
	}
	if !st.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("list %s: not a directory", quote(p)))
	}
	depth := max(req.Msg.GetDepth(), 1)
	var entries []*fspb.EntryInfo
	var walk func(dir, clientDir string, level uint32) error
	walk = func(dir, clientDir string, level uint32) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		sort.Slice(des, func(i, j int) bool { return des[i].Name() < des[j].Name() })
		for _, de := range des {
			if len(entries) >= maxListEntries {
				return fmt.Errorf("more than %d entries: %w", maxListEntries, syscall.E2BIG)
			}
			fi, err := de.Info()
			if err != nil {
				continue // removed in the meantime
			}
			full := filepath.Join(dir, de.Name())
			cp := joinClient(clientDir, de.Name())
			entries = append(entries, describe(cp, full, fi))
			if fi.IsDir() && level < depth {
				if err := walk(full, cp, level+1); err != nil && !os.IsNotExist(err) && !errors.Is(err, os.ErrPermission) {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(real, clean(p), 1); err != nil {
		if errors.Is(err, syscall.E2BIG) {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("list %s: %w", quote(p), err))
		}
		return nil, pathError("list", p, err)
	}
	return connect.NewResponse(&fspb.ListDirResponse{Entries: entries}), nil
}

// MakeDir creates a directory and the missing ones above it;
// already_exists when it is there.
func (s *filesystemService) MakeDir(_ context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	p := s.opts.abs(req.Msg.GetPath())
	real, err := resolve(s.opts.BaseDir, p)
	if err != nil {
		return nil, pathError("make directory", p, err)
	}
	if st, err := os.Stat(real); err == nil {
		if st.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("make directory %s: the directory already exists", quote(p)))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("make directory %s: a file of that name exists", quote(p)))
	}
	if err := os.MkdirAll(real, 0o755); err != nil {
		return nil, pathError("make directory", p, err)
	}
	e, err := entryInfo(clean(p), real)
	if err != nil {
		return nil, pathError("make directory", p, err)
	}
	s.opts.Logger.Info("envd make directory", "path", clean(p))
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: e}), nil
}

// Remove deletes an entry: a file, a symlink (not its target), or a
// directory with everything under it.
func (s *filesystemService) Remove(_ context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	p := s.opts.abs(req.Msg.GetPath())
	if clean(p) == "/" {
		return nil, pathError("remove", p, errRoot)
	}
	real, err := resolveEntry(s.opts.BaseDir, p)
	if err != nil {
		return nil, pathError("remove", p, err)
	}
	st, err := os.Lstat(real)
	if err != nil {
		return nil, pathError("remove", p, err)
	}
	if st.IsDir() {
		err = os.RemoveAll(real)
	} else {
		err = os.Remove(real)
	}
	if err != nil {
		return nil, pathError("remove", p, err)
	}
	s.opts.Logger.Info("envd remove", "path", clean(p))
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}

// Move renames an entry (a symlink itself), making the destination's
// missing directories; an existing destination file is replaced.
func (s *filesystemService) Move(_ context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	src, dst := s.opts.abs(req.Msg.GetSource()), s.opts.abs(req.Msg.GetDestination())
	if clean(src) == "/" || clean(dst) == "/" {
		return nil, pathError("move", src, errRoot)
	}
	from, err := resolveEntry(s.opts.BaseDir, src)
	if err != nil {
		return nil, pathError("move", src, err)
	}
	to, err := resolveEntry(s.opts.BaseDir, dst)
	if err != nil {
		return nil, pathError("move", dst, err)
	}
	if _, err := os.Lstat(from); err != nil {
		return nil, pathError("move", src, err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return nil, pathError("move", dst, err)
	}
	if err := os.Rename(from, to); err != nil {
		return nil, pathError("move", dst, err)
	}
	e, err := entryInfo(clean(dst), to)
	if err != nil {
		return nil, pathError("move", dst, err)
	}
	s.opts.Logger.Info("envd move", "source", clean(src), "destination", clean(dst))
	return connect.NewResponse(&fspb.MoveResponse{Entry: e}), nil
}
