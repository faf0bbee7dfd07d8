package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/fsutil"
)

// pgCluster is a throwaway PostgreSQL cluster a test binary starts once (Debian's
// server, which make test's deps step installs): it runs as the postgres
// user in a directory of its own, listens on a Unix socket there only,
// and goes with StopPostgres (a TestMain calls it).
type pgCluster struct {
	dir string
	cmd *exec.Cmd
	err error
}

var (
	pgOnce sync.Once
	pg     pgCluster
	pgSeq  atomic.Int32
)

// Postgres returns the connection string of a new, empty database in the
// binary's cluster, started on first use. A machine without PostgreSQL's
// server fails the test: make test installs it.
func Postgres(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting PostgreSQL as its own user needs root")
	}
	pgOnce.Do(func() { pg.err = pg.start() })
	if pg.err != nil {
		t.Fatalf("PostgreSQL: %v", pg.err)
	}
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), pgSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.dsn("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return pg.dsn(name)
}

// StopPostgres stops the binary's cluster, if it started one, and removes
// its directory.
func StopPostgres() {
	if pg.cmd == nil {
		return
	}
	_ = pg.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	done := make(chan struct{})
	go func() { _ = pg.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = pg.cmd.Process.Kill()
		<-done
	}
	_ = fsutil.RemoveTree(pg.dir)
}

func (p *pgCluster) dsn(db string) string {
	return fmt.Sprintf("host=%s port=5432 user=cove dbname=%s sslmode=disable", p.dir, db)
}

// postgresBin is the newest installed server's bin directory.
func postgresBin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", fmt.Errorf("no PostgreSQL server in /usr/lib/postgresql (apt-get install postgresql; make test does)")
	}
	sort.Slice(found, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[i]))))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(found[j]))))
		return a < b
	})
	return filepath.Dir(found[len(found)-1]), nil
}

func (p *pgCluster) start() error {
	bin, err := postgresBin()
	if err != nil {
		return err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("the postgres user (made by Debian's package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if p.dir, err = os.MkdirTemp("", "cove-pg-"); err != nil {
		return err
	}
	if err := os.Chown(p.dir, uid, gid); err != nil {
		return err
	}
	as := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	data := filepath.Join(p.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "cove", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr, initdb.Dir = as, p.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", p.dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	p.cmd.SysProcAttr, p.cmd.Dir = as, p.dir
	log, err := os.Create(filepath.Join(p.dir, "log"))
	if err != nil {
		return err
	}
	defer log.Close()
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, p.dsn("postgres"))
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(p.dir, "log"))
			return fmt.Errorf("PostgreSQL did not start: %v: %s", err, b)
		}
	}
}
