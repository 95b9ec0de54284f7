package envd

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb"
)

// entryInfo describes real (not following a final symlink) under the
// client's path p.
func entryInfo(p, real string) (*filesystempb.EntryInfo, error) {
	fi, err := os.Lstat(real)
	if err != nil {
		return nil, err
	}
	return describe(p, real, fi), nil
}

// describe is fi, the entry at real, as EntryInfo under the client's path
// p: its type (a symlink is a symlink, with its target), size, permission
// bits (mode, and as ls prints them), owner, group and modification time.
func describe(p, real string, fi fs.FileInfo) *filesystempb.EntryInfo {
	e := &filesystempb.EntryInfo{
		Name:         fi.Name(),
		Type:         fileType(fi.Mode()),
		Path:         p,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	if p == "/" {
		e.Name = "/"
	}
	if fi.Mode()&fs.ModeSetuid != 0 {
		e.Mode |= syscall.S_ISUID
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		e.Mode |= syscall.S_ISGID
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		e.Mode |= syscall.S_ISVTX
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = names.user(st.Uid)
		e.Group = names.group(st.Gid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(real); err == nil {
			e.SymlinkTarget = &target
		}
	}
	return e
}

func fileType(m fs.FileMode) filesystempb.FileType {
	switch {
	case m&fs.ModeSymlink != 0:
		return filesystempb.FileType_FILE_TYPE_SYMLINK
	case m.IsDir():
		return filesystempb.FileType_FILE_TYPE_DIRECTORY
	default:
		// Regular files, and what E2B has no type for (devices, FIFOs,
		// sockets), are files.
		return filesystempb.FileType_FILE_TYPE_FILE
	}
}

// idNames caches user and group names by id (from /etc/passwd and
// /etc/group); an id without a name is its number.
type idNames struct {
	mu     sync.Mutex
	users  map[uint32]string
	groups map[uint32]string
}

var names = &idNames{users: map[uint32]string{}, groups: map[uint32]string{}}

func (n *idNames) user(id uint32) string {
	return n.lookup(n.users, id, func(s string) (string, error) {
		u, err := user.LookupId(s)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	})
}

func (n *idNames) group(id uint32) string {
	return n.lookup(n.groups, id, func(s string) (string, error) {
		g, err := user.LookupGroupId(s)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

func (n *idNames) lookup(cache map[uint32]string, id uint32, find func(string) (string, error)) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := cache[id]; ok {
		return name
	}
	s := strconv.FormatUint(uint64(id), 10)
	name, err := find(s)
	if err != nil || name == "" {
		name = s
	}
	cache[id] = name
	return name
}

// joinClient is the client's path of name inside the client's directory dir.
func joinClient(dir, name string) string {
	return clean(filepath.ToSlash(filepath.Join(dir, name)))
}
