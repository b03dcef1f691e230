package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/modelrelay/modelrelay/gateway/apierr"
	"github.com/modelrelay/modelrelay/gateway/billing"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// acceptVideo charges a video job when the provider accepts it (docs/api.md#video-jobs):
// duration × the per-second price of the resolution, settled at once, and
// records the job (ids, account, line, amount — never the prompt).
func (rl *relay) acceptVideo(ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error {
	data, err := io.ReadAll(io.LimitReader(up.resp.Body, 1<<20))
	if err != nil {
		return apierr.Unavailable("upstream_error", "the provider's answer was cut; the job was not charged; retry")
	}
	jobID := wire.VideoJobID(data)
	if jobID == "" {
		return apierr.Unavailable("upstream_error", "the provider accepted the job without a request_id; it was not charged")
	}
	amount, err := c.ticket.Settle(ctx, wire.VideoUsage(c.params), "video job "+jobID+" accepted")
	switch {
	case errors.Is(err, store.ErrUnavailable):
		// The last try may have landed with its answer lost: say so
		// rather than "nothing was charged".
		return apierr.Unavailable("store_unavailable", "the provider accepted video job %s, but the ledger did not answer for %s: the job is not recorded, and its charge, if it landed, is in the account's journal under request id %s; check it before you retry",
			apierr.Quote(jobID), billing.StoreRetryFor, c.info.rid)
	case err != nil:
		return apierr.Internal("ledger_error", "the job was accepted but could not be settled")
	}
	c.info.charge = amount.Fixed()
	job := store.Job{
		RequestID: jobID, Account: c.key.Account, KeyID: c.key.ID, Model: c.model.ID,
		Route: c.route, Line: up.line.Name(), Amount: amount, Created: rl.now(),
	}
	// The job is charged: it must be recorded too, or its status could
	// not be read nor its failure refunded. A store that went down since
	// the settle is waited for as a settle is; a record whose commit was
	// lost with the connection is there (ErrExists on the retry, putJob).
	err = rl.bill.WriteOwed("job", c.info.rid, func() error { return rl.putJob(ctx, job) })
	if err != nil {
		rl.log.Error("record video job", "request_id", c.info.rid, "job", apierr.Quote(jobID), "error", err.Error())
	}
	w.Header().Set(costHeader, amount.Fixed())
	rl.writeAnswer(w, up, data)
	return nil
}

// putJob records job, once: a record already there counts if it is this
// job's (an earlier try whose commit was lost: the same account, amount,
// line and creation time), never if it is another's. Each try is bounded,
// as a settle's is.
func (rl *relay) putJob(ctx context.Context, job store.Job) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := rl.store.PutJob(ctx, job)
	if !errors.Is(err, store.ErrExists) {
		return err
	}
	had, gerr := rl.store.Job(ctx, job.RequestID)
	if gerr != nil {
		return gerr
	}
	at := func(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) } // as PostgreSQL keeps it
	if had.Account != job.Account || had.Amount != job.Amount || had.Line != job.Line || !at(had.Created).Equal(at(job.Created)) {
		return fmt.Errorf("the provider's job id %s is already recorded for another job: %w", apierr.Quote(job.RequestID), err)
	}
	return nil
}

// videoJob finds the caller's job: unknown or another account's → 404.
func (rl *relay) videoJob(r *http.Request, ps httprouter.Params, info *reqInfo) (store.Job, *lines.Line, error) {
	k, err := rl.authenticate(r.Context(), r, false, info)
	if err != nil {
		return store.Job{}, nil, err
	}
	id := ps.ByName("id")
	job, err := rl.store.Job(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && job.Account != k.Account) {
		return store.Job{}, nil, apierr.NotFound("no video job %s for this account", apierr.Quote(id))
	}
	if err != nil {
		return store.Job{}, nil, err
	}
	info.model, info.route = job.Model, job.Route
	l := rl.lines.ByName(job.Line)
	if l == nil {
		return store.Job{}, nil, apierr.Unserved("the line %q that runs job %q is no longer configured", job.Line, id)
	}
	info.line = l.Name()
	return job, l, nil
}

// videoGet asks the job's line for path.
func (rl *relay) videoGet(ctx context.Context, l *lines.Line, path string) (*http.Response, error) {
	lc := l.Config()
	ctx, cancel := context.WithTimeout(ctx, lc.Timeouts.FirstByte)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lc.BaseURL+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if key := lc.UpstreamKey(); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := l.Do(req)
	if err != nil {
		cancel()
		l.RecordFailure(rl.now(), err)
		return nil, apierr.Unavailable("upstream_error", "the provider could not be reached for this job; retry")
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

// handleVideoStatus returns the provider's status document as it is; the
// first poll that sees "failed" refunds the job, exactly once.
func (rl *relay) handleVideoStatus(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error {
	job, l, err := rl.videoJob(r, ps, info)
	if err != nil {
		return err
	}
	resp, err := rl.videoGet(r.Context(), l, "/v1/videos/"+job.RequestID)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	up := &upstream{resp: resp, line: l}
	if resp.StatusCode != http.StatusOK {
		return rl.upstreamError(up)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return apierr.Unavailable("upstream_error", "the provider's status document was cut; retry")
	}
	var doc struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(data, &doc) == nil && doc.Status == "failed" {
		refunded, err := rl.store.RefundJob(context.WithoutCancel(r.Context()), job.RequestID, "video job failed")
		if err != nil {
			rl.log.Error("refund video job", "request_id", info.rid, "job", job.RequestID, "error", err.Error())
		} else if refunded {
			rl.log.Info("refunded failed video job", "request_id", info.rid, "job", job.RequestID, "amount_usd", job.Amount.Fixed())
		}
	}
	h := w.Header()
	rl.hdrs.copy(h, resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return nil
}

// handleVideoContent streams the finished video through, never storing it;
// 404 while the job is not done.
func (rl *relay) handleVideoContent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, info *reqInfo) error {
	job, l, err := rl.videoJob(r, ps, info)
	if err != nil {
		return err
	}
	resp, err := rl.videoGet(r.Context(), l, "/v1/videos/"+job.RequestID+"/content")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return apierr.NotFound("video job %q is not finished; poll GET /v1/videos/%s until its status is done", job.RequestID, job.RequestID)
	}
	if resp.StatusCode != http.StatusOK {
		return rl.upstreamError(&upstream{resp: resp, line: l})
	}
	h := w.Header()
	rl.hdrs.copy(h, resp.Header)
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(http.StatusOK)
	start := time.Now()
	_, err = io.Copy(w, resp.Body)
	info.upstream = time.Since(start)
	if err != nil {
		return errStreamCut
	}
	return nil
}
