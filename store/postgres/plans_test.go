package postgres

import (
	"context"
	"net/url"
	"strings"
	"testing"
)

// TestSessionsPriceSequentialScansOut: the store's sessions run with
// enable_seqscan off, so that a generic plan of a call's statement, made
// while holds is nearly empty, uses its index and not a scan through every
// dead row; the settle of a batch is driven by the holds' primary key. A
// DSN that names enable_seqscan keeps its own value.
func TestSessionsPriceSequentialScansOut(t *testing.T) {
	dsn := freshDSN(t)
	s := openStore(t, dsn, Options{RenewEvery: -1})
	ctx := context.Background()
	var v string
	if err := s.pool.QueryRow(ctx, "SHOW enable_seqscan").Scan(&v); err != nil || v != "off" {
		t.Fatalf("enable_seqscan = %q (%v), want off", v, err)
	}
	// The batched settle's plan once the server plans it generically.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "EXPLAIN "+settlesSQL, "acct", []string{"r1"}, []int64{1}, []string{"{}"}, []string{""})
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "Index Cond: (request_id = ANY") || strings.Contains(plan, "Seq Scan on holds") {
		t.Fatalf("the batched settle's generic plan does not look holds up by key:\n%s", plan)
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode"); err != nil {
		t.Fatal(err)
	}

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("enable_seqscan", "on")
	u.RawQuery = q.Encode()
	on := openStore(t, u.String(), Options{RenewEvery: -1})
	if err := on.pool.QueryRow(ctx, "SHOW enable_seqscan").Scan(&v); err != nil || v != "on" {
		t.Fatalf("with enable_seqscan=on in the DSN: %q (%v), want on", v, err)
	}
}
