package network

import (
	"crypto/tls"
	"sync"
	"time"

	"github.com/covesandbox/cove/internal/localca"
)

// egressCA is the node's own certificate authority for the egress proxy:
// it signs the certificates the proxy shows sandboxes for the names whose
// requests it transforms (TLS terminated there). Its key never leaves the
// node: it is kept in the node's directory (owner only), or in memory.
type egressCA struct {
	*localca.CA

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by name
}

// leafValidity is how long a name's certificate is good for; it is made
// again a day before its end.
const leafValidity = 7 * 24 * time.Hour

func loadEgressCA(dir string) (*egressCA, error) {
	ca, err := localca.Load(dir, "Cove egress CA")
	if err != nil {
		return nil, err
	}
	return &egressCA{CA: ca, leaves: map[string]*tls.Certificate{}}, nil
}

// leaf is the certificate the proxy shows for name, made on first use and
// again when it nears its end.
func (ca *egressCA) leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[name]; ok && time.Until(c.Leaf.NotAfter) > 24*time.Hour {
		return c, nil
	}
	c, err := ca.Issue([]string{name}, leafValidity)
	if err != nil {
		return nil, err
	}
	if len(ca.leaves) > 4096 { // names come from rules: bounded, but drop them all past this
		clear(ca.leaves)
	}
	ca.leaves[name] = &c
	return &c, nil
}
