package standin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxLine is the longest line the log pump holds back waiting for its end;
// a longer one is written as CRI partial lines ("P").
const maxLine = 16 << 10

// criLine formats one log line as the CRI log format kwok's Logs read
// (the kubelet's container log format): "<RFC3339Nano> <stream> <F|P> <line>".
// The runtime's stdout and stderr share one file, so every line is stdout.
func criLine(now time.Time, line []byte, partial bool) []byte {
	tag := " stdout F "
	if partial {
		tag = " stdout P "
	}
	out := make([]byte, 0, len(line)+48)
	out = now.UTC().AppendFormat(out, time.RFC3339Nano)
	out = append(out, tag...)
	out = append(out, line...)
	return append(out, '\n')
}

// pumpOnce copies what the runtime has written to rawLog since the offset
// recorded in offsetFile into criLog as CRI lines, and records the new
// offset. A trailing line without its newline waits for the next call
// (unless flush is set or it is longer than maxLine). The offset is recorded
// after the lines are written: a stand-in killed in between writes those
// lines again rather than losing them.
func pumpOnce(sbDir string, now time.Time, flush bool) error {
	off := readOffset(sbDir)
	raw, err := os.Open(filepath.Join(sbDir, rawLog))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer func() { _ = raw.Close() }()
	if st, err := raw.Stat(); err != nil {
		return err
	} else if st.Size() < off {
		off = 0 // truncated: a new Pod's process
	}
	data, err := io.ReadAll(io.NewSectionReader(raw, off, 1<<62))
	if err != nil || len(data) == 0 {
		return err
	}
	out, used := criLines(data, now, flush)
	if used == 0 {
		return nil
	}
	return appendAndRecord(sbDir, out, off+int64(used))
}

// criLines formats the complete lines of data (all of it with flush) and
// returns them with the number of bytes of data they cover.
func criLines(data []byte, now time.Time, flush bool) ([]byte, int) {
	var out []byte
	used := 0
	for used < len(data) {
		rest := data[used:]
		i := bytes.IndexByte(rest, '\n')
		switch {
		case i >= 0 && i <= maxLine:
			out = append(out, criLine(now, rest[:i], false)...)
			used += i + 1
		case len(rest) > maxLine:
			out = append(out, criLine(now, rest[:maxLine], true)...)
			used += maxLine
		case flush:
			out = append(out, criLine(now, rest, false)...)
			used += len(rest)
		default:
			return out, used // wait for the end of the line
		}
	}
	return out, used
}

func appendAndRecord(sbDir string, lines []byte, off int64) error {
	f, err := os.OpenFile(filepath.Join(sbDir, criLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(lines); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	tmp := filepath.Join(sbDir, offsetFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(off, 10)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(sbDir, offsetFile))
}

func readOffset(sbDir string) int64 {
	data, err := os.ReadFile(filepath.Join(sbDir, offsetFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// pump runs pumpOnce every interval until ctx ends, and once more then. A
// line still without its end stays for the next stand-in, or for the flush
// after the process has stopped.
func pump(ctx context.Context, sbDir string, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := pumpOnce(sbDir, time.Now(), false); err != nil {
				onErr(err)
			}
			return
		case <-t.C:
			if err := pumpOnce(sbDir, time.Now(), false); err != nil {
				onErr(err)
			}
		}
	}
}
