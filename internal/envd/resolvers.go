package envd

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// maxResolvers bounds the nameservers an /init may write (E2B allows 10
// dnsServers; resolvers read the first 3).
const maxResolvers = 16

// writeResolvers replaces the nameservers of the resolv.conf at path with
// servers, each an IP address. A link at path is replaced, not followed.
func writeResolvers(path string, servers []string) error {
	if len(servers) > maxResolvers {
		return errs.New(errs.InvalidArgument, "resolvers: %d, at most %d", len(servers), maxResolvers)
	}
	var b strings.Builder
	for _, s := range servers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return errs.New(errs.InvalidArgument, "resolver %q: not an IP address", s)
		}
		b.WriteString("nameserver " + a.String() + "\n")
	}
	tmp := path + ".cove"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("resolvers: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path) // replaces a link at path, never follows it
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("resolvers: %w", err)
	}
	return nil
}
