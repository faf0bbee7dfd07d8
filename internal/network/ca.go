package network

import (
	"crypto/tls"
	"time"

	"github.com/covesandbox/cove/internal/localca"
)

// egressCA is the node's own certificate authority for the egress proxy:
// it signs the certificates the proxy shows sandboxes for the names whose
// requests it transforms (TLS terminated there). Its key never leaves the
// node: it is kept in the node's directory (owner only), or in memory.
type egressCA struct {
	*localca.CA
	leaves *localca.Leaves
}

// leafValidity is how long a name's certificate is good for; it is made
// again once half of it has passed.
const leafValidity = 7 * 24 * time.Hour

// maxLeaves bounds the names' certificates kept (names come from rules,
// so few): past it, the least recently shown is made again when next
// shown.
const maxLeaves = 4096

func loadEgressCA(dir string) (*egressCA, error) {
	ca, err := localca.Load(dir, "Cove egress CA")
	if err != nil {
		return nil, err
	}
	leaves, err := ca.Leaves(maxLeaves, leafValidity)
	if err != nil {
		return nil, err
	}
	return &egressCA{CA: ca, leaves: leaves}, nil
}

// leaf is the certificate the proxy shows for name, made on first use and
// again when it nears its end.
func (ca *egressCA) leaf(name string) (*tls.Certificate, error) { return ca.leaves.Get(name) }
