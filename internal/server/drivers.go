package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/covesandbox/cove/internal/isolation"
	"github.com/covesandbox/cove/internal/isolation/gvisor"
	"github.com/covesandbox/cove/internal/isolation/microvm"
	"github.com/covesandbox/cove/internal/isolation/namespaces"
	"github.com/covesandbox/cove/internal/logx"
)

// driverSet is a node's isolation drivers: namespaces always, gVisor when
// runsc runs here and microVMs when QEMU and a guest kernel are here, the
// configured default first. The ones missing have their reasons in
// unavailable and can be opened again later (prepare.go); Close closes
// every driver opened.
type driverSet struct {
	def         isolation.Driver
	more        []isolation.Driver
	unavailable map[string]string

	optional map[string]func() (isolation.Driver, func(), error)
	mu       sync.Mutex
	closers  []func()
	closed   bool
}

// openDrivers opens the drivers cfg asks for; the default must open.
func openDrivers(cfg Config, log *slog.Logger) (*driverSet, error) {
	ns, err := namespaces.New(namespaces.Config{Dir: filepath.Join(cfg.DataDir, "sandboxes"), CgroupParent: cfg.CgroupParent, LXCFS: cfg.LXCFS,
		SandboxBinary: cfg.SandboxBinary, UserNamespaces: !cfg.NoUserNamespaces}, log)
	if err != nil {
		return nil, err
	}
	s := &driverSet{unavailable: map[string]string{}, closers: []func(){ns.Close}}
	agent := cfg.SandboxBinary
	if agent == "" {
		if agent, err = os.Executable(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.optional = map[string]func() (isolation.Driver, func(), error){
		"gvisor": func() (isolation.Driver, func(), error) {
			gv, err := gvisor.New(gvisor.Config{Dir: filepath.Join(cfg.DataDir, "gvisor"), CgroupParent: cfg.CgroupParent,
				Runsc: runscPath(cfg.Runsc), SandboxBinary: agent}, log)
			if err != nil {
				return nil, nil, err
			}
			return gv, gv.Close, nil
		},
		"microvm": func() (isolation.Driver, func(), error) {
			vm, err := microvm.NewDriver(microvm.DriverConfig{Dir: filepath.Join(cfg.DataDir, "microvm"), SandboxBinary: agent,
				QEMU: cfg.QEMU, KernelDir: cfg.GuestKernel, CgroupParent: cfg.CgroupParent, BindImages: cfg.MicroVMBindImages,
				BootSnapshots: cfg.MicroVMBootSnapshots, Log: log})
			if err != nil {
				return nil, nil, err
			}
			return vm, vm.Close, nil
		},
	}
	all := []isolation.Driver{ns}
	for _, name := range []string{"gvisor", "microvm"} {
		d, err := s.open(name)
		if err != nil {
			s.unavailable[name] = err.Error()
			log.Info(name+" isolation unavailable", logx.Err(err))
			continue
		}
		all = append(all, d)
	}
	want := cfg.DefaultIsolation
	if want == "" {
		want = ns.Name()
	}
	for i, d := range all {
		if d.Name() == want {
			s.def, s.more = d, append(all[:i:i], all[i+1:]...)
			return s, nil
		}
	}
	s.Close()
	if why, ok := s.unavailable[want]; ok {
		return nil, fmt.Errorf("default isolation %q: %s", want, why)
	}
	return nil, fmt.Errorf("default isolation %q: want namespaces, gvisor or microvm", want)
}

// open opens the optional driver name, which Close then closes.
func (s *driverSet) open(name string) (isolation.Driver, error) {
	d, closeIt, err := s.optional[name]()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeIt()
		return nil, fmt.Errorf("%s isolation: the node is closing", name)
	}
	s.closers = append(s.closers, closeIt)
	return d, nil
}

// Close closes every driver opened.
func (s *driverSet) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closers {
		c()
	}
	s.closers, s.closed = nil, true
}

// runscPath is the runsc the gvisor driver runs: p when set, else runsc
// beside the running binary when it is there now (make puts it in bin/,
// maybe after the server started), else "" (PATH's).
func runscPath(p string) string {
	if p != "" {
		return p
	}
	return BesideSelf("runsc")
}

// BesideSelf is the path of the executable file name in the running
// binary's directory, or "" when there is none.
func BesideSelf(name string) string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), name)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return ""
	}
	return p
}
