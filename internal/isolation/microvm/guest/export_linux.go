package guest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/covesandbox/cove/internal/layertar"
)

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
