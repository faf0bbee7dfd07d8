package node

import (
	"context"
	"slices"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/logx"
)

// unavailable is why the node lacks a driver; preparing says it is being
// prepared, so that a create asking for it may try again later.
type unavailable struct {
	why       string
	preparing bool
}

// Isolations names the drivers this node runs sandboxes with, the default
// first, the others by name.
func (m *Manager) Isolations() []string {
	m.drvMu.RLock()
	defer m.drvMu.RUnlock()
	var more []string
	for name := range m.drivers {
		if name != m.driver.Name() {
			more = append(more, name)
		}
	}
	slices.Sort(more)
	return append([]string{m.driver.Name()}, more...)
}

// driverList is the node's drivers, the default's first.
func (m *Manager) driverList() []isolation.Driver {
	m.drvMu.RLock()
	defer m.drvMu.RUnlock()
	all := []isolation.Driver{m.driver}
	for name, d := range m.drivers {
		if name != m.driver.Name() {
			all = append(all, d)
		}
	}
	return all
}

// driverNamed is the driver a create asks for ("" = the default), or an
// error saying why there is none: Unavailable while it is being prepared,
// InvalidArgument otherwise.
func (m *Manager) driverNamed(name string) (isolation.Driver, error) {
	if name == "" {
		return m.driver, nil
	}
	m.drvMu.RLock()
	d, ok := m.drivers[name]
	why, lacks := m.unavailable[name]
	m.drvMu.RUnlock()
	switch {
	case ok:
		return d, nil
	case lacks && why.preparing:
		return nil, errs.WithHint(errs.New(errs.Unavailable, "isolation %q is being prepared on this node (%s): try again later", name, why.why),
			errs.Hint{Code: errs.CodeIsolationPreparing})
	case lacks:
		return nil, errs.New(errs.InvalidArgument, "isolation %q is not available on this node: %s", name, why.why)
	}
	return nil, errs.New(errs.InvalidArgument, "unknown isolation %q: this node offers %s", name, strings.Join(m.Isolations(), ", "))
}

// recordDriver is the driver a record names (the default's for records
// older than the field, or naming a driver this node no longer has). It
// takes no sandbox lock: the caller holds the sandbox's, or owns info.
func (m *Manager) recordDriver(info Info) isolation.Driver {
	m.drvMu.RLock()
	defer m.drvMu.RUnlock()
	if d, ok := m.drivers[info.Isolation]; ok {
		return d
	}
	return m.driver
}

// SetUnavailable says why the node lacks the driver name; preparing says
// that it is being prepared (a create asking for it is told to try again).
func (m *Manager) SetUnavailable(name, why string, preparing bool) {
	m.drvMu.Lock()
	defer m.drvMu.Unlock()
	if _, ok := m.drivers[name]; !ok {
		m.unavailable[name] = unavailable{why: why, preparing: preparing}
	}
}

// AddDriver adds a driver after the node serves (one that was being
// prepared). What it holds from an earlier run that no sandbox of this
// node owns is removed first, as Recover does for the drivers it starts
// with.
func (m *Manager) AddDriver(ctx context.Context, d isolation.Driver) error {
	if _, err := m.removeLeftovers(ctx, d, func(id string) bool { return m.lookup(id) != nil }); err != nil {
		return err
	}
	m.drvMu.Lock()
	defer m.drvMu.Unlock()
	if _, ok := m.drivers[d.Name()]; ok {
		return errs.New(errs.AlreadyExists, "the node has an isolation driver named %q", d.Name())
	}
	m.drivers[d.Name()] = d
	delete(m.unavailable, d.Name())
	return nil
}

// removeLeftovers destroys what d holds that is not known, and counts it.
func (m *Manager) removeLeftovers(ctx context.Context, d isolation.Driver, known func(id string) bool) (int, error) {
	lister, ok := d.(isolation.Lister)
	if !ok {
		return 0, nil
	}
	ids, err := lister.List(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, id := range ids {
		if known(id) {
			continue
		}
		if err := d.Destroy(ctx, id); err != nil {
			m.log.Error("remove leftover sandbox", logx.SandboxID(id), logx.Err(err))
			continue
		}
		removed++
	}
	return removed, nil
}
