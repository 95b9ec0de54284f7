package tests

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Socket is a socket a process listens on: a listening TCP socket, or a
// bound UDP socket with no peer.
type Socket struct {
	PID   int
	Comm  string // the process's name
	Proto string // tcp, tcp6, udp, udp6
	Addr  netip.AddrPort
}

func (s Socket) String() string {
	return fmt.Sprintf("%s (pid %d) %s %s", s.Comm, s.PID, s.Proto, s.Addr)
}

// Listening returns the sockets the processes listen on, read from /proc:
// each process's socket file descriptors matched by inode against the
// kernel's tables in its network namespace.
func Listening(pids ...int) ([]Socket, error) {
	var out []Socket
	for _, pid := range pids {
		proc := filepath.Join("/proc", strconv.Itoa(pid))
		fds, err := os.ReadDir(filepath.Join(proc, "fd"))
		if err != nil {
			return nil, fmt.Errorf("sockets of pid %d: %w", pid, err)
		}
		comm, _ := os.ReadFile(filepath.Join(proc, "comm"))
		inodes := map[string]bool{}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(proc, "fd", fd.Name()))
			if err != nil {
				continue // closed meanwhile
			}
			if inode, ok := strings.CutPrefix(link, "socket:["); ok {
				inodes[strings.TrimSuffix(inode, "]")] = true
			}
		}
		for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
			data, err := os.ReadFile(filepath.Join(proc, "net", proto))
			if err != nil {
				return nil, fmt.Errorf("sockets of pid %d: %w", pid, err)
			}
			socks, err := parseNet(pid, proto, string(data), inodes)
			if err != nil {
				return nil, err
			}
			for i := range socks {
				socks[i].Comm = strings.TrimSpace(string(comm))
			}
			out = append(out, socks...)
		}
	}
	return out, nil
}

// parseNet reads a /proc/net/{tcp,udp}[6] table and keeps the listening
// sockets whose inode is in inodes.
func parseNet(pid int, proto, table string, inodes map[string]bool) ([]Socket, error) {
	var out []Socket
	lines := strings.Split(strings.TrimSpace(table), "\n")
	for _, line := range lines[1:] { // the first line names the columns
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		// 0A is TCP_LISTEN; a UDP socket is bound and unconnected in 07
		// (TCP_CLOSE) with no remote port.
		listening := strings.HasPrefix(proto, "tcp") && f[3] == "0A" ||
			strings.HasPrefix(proto, "udp") && f[3] == "07" && strings.HasSuffix(f[2], ":0000")
		if !listening {
			continue
		}
		addr, err := parseHexAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %q: %w", proto, line, err)
		}
		out = append(out, Socket{PID: pid, Proto: proto, Addr: addr})
	}
	return out, nil
}

// parseHexAddr reads the kernel's ADDR:PORT, the address in 32-bit words of
// host (little-endian) byte order, the port big-endian hex.
func parseHexAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: not 4 or 16 hex bytes", s)
	}
	for w := 0; w < len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: port: %w", s, err)
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}

// NotLoopback returns the sockets that other machines could reach: those
// not bound to a loopback address.
func NotLoopback(socks []Socket) []Socket {
	var out []Socket
	for _, s := range socks {
		if !s.Addr.Addr().IsLoopback() {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the PIDs of the running (not zombie) child processes of
// pid.
func Children(pid int) []int {
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 2 && f[0] != "Z" && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
