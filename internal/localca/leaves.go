package localca

import (
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"sync"
	"time"
)

// Leaves issues a certificate naming one host, on demand, and keeps the
// max most recently asked for. Every certificate it issues has the same
// key, made with it and kept in memory only: one costs the CA's signature,
// not a key of its own too.
//
// It is for names a TLS server learns from its clients (SNI): a wildcard
// directly under a single-label name (*.localhost) is one that OpenSSL,
// rustls and Node refuse, so such hosts need a certificate each.
type Leaves struct {
	ca       *CA
	key      *ecdsa.PrivateKey
	max      int
	validity time.Duration

	mu     sync.Mutex
	recent *list.List               // of *leaf, the most recently asked for first
	byName map[string]*list.Element // its elements by name
}

type leaf struct {
	name  string
	cert  *tls.Certificate
	renew time.Time // when half its validity has passed
}

// Leaves returns a cache of at most max certificates, each valid for
// validity and made again once half of it has passed.
func (ca *CA) Leaves(max int, validity time.Duration) (*Leaves, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &Leaves{ca: ca, key: key, max: max, validity: validity, recent: list.New(), byName: map[string]*list.Element{}}, nil
}

// Get returns the certificate for name (a DNS name), issuing it when it is
// not kept or is due to be made again; the least recently asked for goes
// past the bound.
func (l *Leaves) Get(name string) (*tls.Certificate, error) {
	l.mu.Lock()
	if e, ok := l.byName[name]; ok && time.Now().Before(e.Value.(*leaf).renew) {
		l.recent.MoveToFront(e)
		l.mu.Unlock()
		return e.Value.(*leaf).cert, nil
	}
	l.mu.Unlock()
	// Signing holds no lock: one client's names do not hold up another's.
	c, err := l.ca.issue([]string{name}, l.key, l.validity)
	if err != nil {
		return nil, err
	}
	made := &leaf{name: name, cert: &c, renew: time.Now().Add(l.validity / 2)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byName[name]; ok {
		l.recent.Remove(e)
	}
	l.byName[name] = l.recent.PushFront(made)
	for l.recent.Len() > l.max {
		delete(l.byName, l.recent.Remove(l.recent.Back()).(*leaf).name)
	}
	return made.cert, nil
}

// Len is how many certificates it keeps.
func (l *Leaves) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recent.Len()
}
