//go:build !linux

package main

import "errors"

// releaseExecutablePages is Linux's only (/proc/self/maps, madvise).
func releaseExecutablePages() (before, after int64, err error) {
	return 0, 0, errors.New("unmapping the executable's pages is done on Linux only")
}
