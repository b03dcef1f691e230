package billing

import (
	"context"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/store"
)

// deadlineStore records whether each Hold and Settle was given a deadline;
// it is InProcess when local is set.
type deadlineStore struct {
	local                bool
	holdDL, settleDL     bool
	holds, settles, rels int
}

func (d *deadlineStore) InProcess() bool { return d.local }

func (d *deadlineStore) Hold(ctx context.Context, _ store.Hold) error {
	_, d.holdDL = ctx.Deadline()
	d.holds++
	return nil
}

func (d *deadlineStore) Settle(ctx context.Context, _ store.Settlement) (store.Entry, error) {
	_, d.settleDL = ctx.Deadline()
	d.settles++
	return store.Entry{}, nil
}

func (d *deadlineStore) Release(context.Context, string, string) error { d.rels++; return nil }

// TestInProcessStoreWritesHaveNoDeadline: an InProcess store's hold and
// settle run without a deadline (it never waits on them: a timer and
// allocations per call for nothing); any other store's are bounded by
// billing.max_store_wait and the settle's 10 s.
func TestInProcessStoreWritesHaveNoDeadline(t *testing.T) {
	for _, local := range []bool{true, false} {
		s := &deadlineStore{local: local}
		o := Options{Store: s}
		o.Config.Billing.MaxStoreWait = time.Second
		l := New(o)
		if err := l.storeHold(context.Background(), store.Hold{RequestID: "req_1", Account: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := l.writeSettle(context.Background(), store.Settlement{RequestID: "req_1", Account: "a"}); err != nil {
			t.Fatal(err)
		}
		if s.holds != 1 || s.settles != 1 || s.holdDL == local || s.settleDL == local {
			t.Errorf("InProcess %v: hold deadline %v, settle deadline %v (%d holds, %d settles)", local, s.holdDL, s.settleDL, s.holds, s.settles)
		}
	}
}
