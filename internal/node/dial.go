package node

import (
	"context"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/network"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Running reports whether a sandbox is in the table and running.
func (m *Manager) Running(id string) bool {
	info, err := m.get(id)
	return err == nil && info.State == StateRunning
}

// Dial connects to port inside a running sandbox.
func (m *Manager) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	if !m.Running(id) {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return m.driverOf(id).Dial(ctx, id, port)
}

// TrafficToken is the token a sandbox's ports require ("" = public).
func (m *Manager) TrafficToken(id string) string {
	info, err := m.get(id)
	if err != nil {
		return ""
	}
	return info.TrafficToken
}

// PortRoute is how traffic to port of sandbox id goes: the Host header it
// gets (its maskRequestHost with the port, or "" to keep the client's),
// and whether the port serves HTTPS.
func (m *Manager) PortRoute(id string, port int) (string, bool) {
	info, err := m.get(id)
	if err != nil {
		return "", false
	}
	return sandboxes.MaskHost(info.MaskRequestHost, port), slices.Contains(info.HTTPSPorts, port)
}

// UpdateNetwork applies an update to a running sandbox's network.
func (m *Manager) UpdateNetwork(_ context.Context, id string, u NetworkUpdate) error {
	sb := m.lookup(id)
	if sb == nil {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.net == nil || sb.info.Network == nil {
		return errs.New(errs.Conflict, "sandbox %s has no network of its own", id)
	}
	ni := *sb.info.Network // snapshots share the old one
	// Its resolvers are written through its agent: it runs, or nothing
	// changes.
	newDNS := u.DNSServers != nil && !slices.Equal(*u.DNSServers, ni.DNSServers)
	if newDNS && sb.info.Phase() != PhaseRunning {
		return errs.New(errs.Conflict, "sandbox %s is %s: its dnsServers change while it runs", id, sb.info.Phase())
	}
	// Rules naming a token the sandbox lacks are refused before anything
	// changes.
	if u.Rules != nil {
		if err := network.CheckTokenRefs(*u.Rules, ni.Tokens); err != nil {
			return err
		}
	}
	// What waits on the outside (a name's resolution, the agent) is bounded:
	// the sandbox's lock is held.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The upstream first: the one change refused for what it names (an
	// address the node may not reach), before anything else changed.
	if u.SetEgressProxy {
		if err := m.cfg.Networks.SetEgressProxy(ctx, sb.net, u.EgressProxy); err != nil {
			return err
		}
		ni.EgressProxy = u.EgressProxy
	}
	if u.Internet != nil {
		if err := m.cfg.Networks.SetInternet(sb.net, *u.Internet); err != nil {
			return err
		}
		ni.Internet = *u.Internet
	}
	if u.AllowOut != nil || u.DenyOut != nil {
		if u.AllowOut != nil {
			ni.AllowOut = *u.AllowOut
		}
		if u.DenyOut != nil {
			ni.DenyOut = *u.DenyOut
		}
		if err := m.cfg.Networks.SetRules(sb.net, ni.AllowOut, ni.DenyOut); err != nil {
			return err
		}
	}
	if u.AllowDomains != nil {
		ni.AllowDomains = *u.AllowDomains
		if err := m.cfg.Networks.SetDomains(sb.net, ni.AllowDomains); err != nil {
			return err
		}
	}
	if newDNS {
		ni.DNSServers = *u.DNSServers
		if len(ni.DNSServers) == 0 {
			ni.DNSServers = nil
		}
		if err := m.setResolvers(ctx, sb.agent, &ni); err != nil {
			return err
		}
	}
	if u.Rules != nil {
		had := len(ni.Rules) > 0
		ni.Rules = *u.Rules
		if err := m.cfg.Networks.SetTransforms(sb.net, network.Workload{Team: sb.info.Team, Sandbox: sb.info.ID, Tokens: ni.Tokens}, ni.Rules); err != nil {
			return err
		}
		if !had && sb.info.State == StateRunning {
			if err := m.trustEgressCA(ctx, sb.agent, &ni); err != nil {
				return err
			}
		}
	}
	sb.info.Network = &ni
	return m.writeRecord(sb.info)
}

// AgentTransport is the node's connection pool to a running sandbox's
// agent, without the node's token (proxy.Sandboxes).
func (m *Manager) AgentTransport(id string) (http.RoundTripper, bool) {
	c, err := m.Agent(id)
	if err != nil || c == nil {
		return nil, false
	}
	return c.Raw, true
}

// AccessToken is the token a sandbox's agent requires ("" = none).
func (m *Manager) AccessToken(id string) string {
	info, err := m.get(id)
	if err != nil {
		return ""
	}
	return info.AccessToken
}
