package guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/layertar"
)

// serveExports serves ExportPort on addr: the writable layer upper (the
// overlay's upper directory) of the sandbox in cgroup, frozen for the
// copy. One export runs at a time.
func serveExports(addr, upper, cgroup string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(ExportPort)))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Only the node: its address is on the tap's far end, which
			// a sandbox (no CAP_NET_ADMIN or CAP_NET_RAW) cannot take.
			if a, ok := c.RemoteAddr().(*net.TCPAddr); !ok || a.IP.String() != NodeAddr {
				c.Close()
				continue
			}
			go func() {
				mu.Lock()
				defer mu.Unlock()
				export(c, upper, cgroup)
			}()
		}
	}()
	return nil
}

// export writes the layer to c while the sandbox is frozen, and thaws it
// once the node has closed c.
func export(c net.Conn, upper, cgroup string) {
	defer c.Close()
	fw := frameWriter{c}
	if err := freeze(cgroup, true); err != nil {
		fw.end(err)
		freeze(cgroup, false)
		return
	}
	bw := bufio.NewWriterSize(fw, 256<<10)
	err := layertar.Pack(bw, upper, layertar.PackOptions{Opaque: "user.overlay.opaque", SkipSpecial: true})
	if err == nil {
		err = bw.Flush()
	}
	if fw.end(err) == nil {
		io.Copy(io.Discard, c) // until the node lets go
	}
	if err := freeze(cgroup, false); err != nil {
		fmt.Fprintf(os.Stderr, "cove-guest: thaw the sandbox: %v\n", err)
	}
}

// freeze freezes (or thaws) the processes of a cgroup v2 and waits until
// the kernel says they are.
func freeze(cgroup string, frozen bool) error {
	want := map[bool]string{false: "0", true: "1"}[frozen]
	if err := os.WriteFile(cgroup+"/cgroup.freeze", []byte(want), 0); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		b, err := os.ReadFile(cgroup + "/cgroup.events")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "frozen "+want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's cgroup is not frozen=%s after 10s", want)
		}
	}
}
