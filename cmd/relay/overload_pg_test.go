package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCluster is a PostgreSQL cluster of the test's own, every process of it
// pinned to one CPU: the shared server on :5432 runs other tests, and could
// neither be pinned nor starved.
type pgCluster struct {
	bin, root, data string
	runAs           []string // runuser -u postgres -- when the test runs as root
	port            string
	cmd             *exec.Cmd
}

// startPostgres makes a cluster with initdb in a temporary directory and
// starts it with taskset on cpu, so that every PostgreSQL process (the
// backends, autovacuum) inherits the pin; it is stopped (immediate) and
// removed when t ends. Run as root, PostgreSQL runs as the postgres user.
// It skips t where initdb is not installed, and returns the URL of an
// empty database of the cluster.
func startPostgres(t *testing.T, cpu int) (*pgCluster, string) {
	t.Helper()
	initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdbs) == 0 {
		t.Skip("overload tests on PostgreSQL skipped: they make a cluster of their own with /usr/lib/postgresql/*/bin/initdb, which is not installed")
	}
	slices.SortFunc(initdbs, func(a, b string) int { return len(a) - len(b) }) // 9.6 before 15, …
	c := &pgCluster{bin: filepath.Dir(initdbs[len(initdbs)-1])}
	root, err := os.MkdirTemp("", "relay-overload-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	c.root, c.data = root, filepath.Join(root, "data")
	sock := filepath.Join(root, "sock")
	for _, d := range []string{c.data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		c.runAs = runAsPostgres(t, root, c.data, sock)
	}
	if out, err := c.command("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	_, c.port, _ = net.SplitHostPort(freeAddr(t))
	logFile, err := os.Create(filepath.Join(root, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	args := append(slices.Clone(c.runAs), "taskset", "-c", strconv.Itoa(cpu), filepath.Join(c.bin, "postgres"),
		"-D", c.data, "-p", c.port, "-k", sock, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on")
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Dir = root
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(t) })
	return c, c.createDatabase(t, "relay")
}

// runAsPostgres hands the cluster's directories to the postgres user and
// returns the prefix that runs a command as it.
func runAsPostgres(t *testing.T, root string, dirs ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("overload tests on PostgreSQL skipped: run as root, they run PostgreSQL as the postgres user with runuser (util-linux), which is not installed")
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("overload tests on PostgreSQL skipped: run as root, they run PostgreSQL as the postgres user, and there is none")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"runuser", "-u", "postgres", "--"}
}

// command is the cluster's program name with args, run as its user.
func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	all := append(append(slices.Clone(c.runAs), filepath.Join(c.bin, name)), args...)
	cmd := exec.Command(all[0], all[1:]...)
	cmd.Dir = c.root // where its user may be
	return cmd
}

// hostport is where the cluster listens.
func (c *pgCluster) hostport() string { return net.JoinHostPort("127.0.0.1", c.port) }

// url is the URL of database db of the cluster.
func (c *pgCluster) url(db string) string {
	return "postgres://postgres@" + c.hostport() + "/" + db + "?sslmode=disable"
}

// createDatabase waits up to a minute for the cluster to answer, creates
// database db and returns its URL.
func (c *pgCluster) createDatabase(t *testing.T, db string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		if err == nil {
			_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
			conn.Close(ctx)
			cancel()
			if err != nil {
				t.Fatalf("create database %s: %v", db, err)
			}
			return c.url(db)
		}
		cancel()
		if time.Now().After(deadline) || c.cmd.ProcessState != nil {
			t.Fatalf("the test's PostgreSQL does not answer on %s: %v\n%s", c.hostport(), err, c.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postmaster is the pid of the cluster's postmaster.
func (c *pgCluster) postmaster(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %q", b)
	}
	return pid
}

// log is the end of the cluster's log.
func (c *pgCluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.root, "postgres.log"))
	return tail(string(b), 4000)
}

// stop stops the cluster at once (pg_ctl stop -m immediate), then makes
// sure its process has ended.
func (c *pgCluster) stop(t *testing.T) {
	if t.Failed() {
		t.Logf("the test's PostgreSQL, the end of its log:\n%s", c.log())
	}
	if out, err := c.command("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "30", "stop").CombinedOutput(); err != nil {
		t.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Errorf("the test's PostgreSQL did not end after pg_ctl stop")
	}
}
