package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseExecutablePages unmaps this process's private read-only mappings
// of its own executable (code, read-only data, the runtime's pc tables):
// madvise(MADV_DONTNEED), which for a clean copy of a file only drops the
// mapping. Writable mappings (data, bss) are never touched. It returns the
// process's file-backed resident bytes before and after.
func releaseExecutablePages() (before, after int64, err error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, err
	}
	before = rssFile()
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// address perms offset dev inode path
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 6 || strings.TrimSpace(f[5]) != exe || !readOnlyPrivate(f[1]) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return before, rssFile(), fmt.Errorf("reading /proc/self/maps: %q", sc.Text())
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED); errno != 0 {
			return before, rssFile(), fmt.Errorf("madvise %s (%s): %w", f[0], f[1], errno)
		}
	}
	return before, rssFile(), sc.Err()
}

// readOnlyPrivate reports whether a mapping's permissions (r-xp) are a
// private mapping that cannot be written.
func readOnlyPrivate(perms string) bool {
	return len(perms) == 4 && perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p'
}

// rssFile is the process's file-backed resident bytes (-1: unknown).
func rssFile() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}
