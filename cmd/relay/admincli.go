package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelrelay/modelrelay/gateway/admin"
)

// adminClient calls the gateway's admin API.
type adminClient struct {
	server string
	token  string
	http   *http.Client
}

func newAdminClient(server string) (*adminClient, error) {
	tok := os.Getenv("RELAY_ADMIN_TOKEN")
	if tok == "" {
		return nil, errors.New("RELAY_ADMIN_TOKEN is not set (the gateway's admin token)")
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("-server: %q is not a URL", server)
	}
	return &adminClient{server: strings.TrimRight(server, "/"), token: tok, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

func (c *adminClient) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.server+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the gateway at %s: %v", c.server, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return errors.New(e.Error.Message)
		}
		return fmt.Errorf("gateway answered HTTP %d", resp.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func subcommand(args []string, name string, subs ...string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("usage: relay %s %s", name, strings.Join(subs, "|"))
	}
	for _, s := range subs {
		if args[0] == s {
			return s, args[1:], nil
		}
	}
	return "", nil, fmt.Errorf("relay %s: unknown subcommand %q (want %s)", name, args[0], strings.Join(subs, ", "))
}

// parseInterleaved parses args with fs, flags and positional arguments in
// any order (the flag package stops at the first positional, so it is
// called again on what follows each one); "--" ends the flags. It returns
// the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// noArgs is the error for positional arguments a subcommand does not take.
func noArgs(cmd string, pos []string) error {
	if len(pos) == 0 {
		return nil
	}
	return fmt.Errorf("%s: unexpected argument %q (flags start with -)", cmd, pos[0])
}

// listFlag is a flag that may be repeated, each value a comma-separated
// list: -allow 10.0.0.0/8 -allow 192.168.0.0/16,203.0.113.7.
type listFlag struct {
	vals []string
}

func (l *listFlag) String() string { return strings.Join(l.vals, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.vals = append(l.vals, s)
		}
	}
	return nil
}

// keyFlags are a key's settings on the command line: keys create and
// keys update take the same ones.
type keyFlags struct {
	label, limitUSD, limitReset, expires string
	allow                                listFlag
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.label, "label", "", "a label for the key")
	fs.StringVar(&k.limitUSD, "limit-usd", "", "spend limit per period in USD, e.g. 5 (0: none)")
	fs.StringVar(&k.limitReset, "limit-reset", "", "when the limit resets: daily, weekly, monthly (00:00 UTC) or none")
	fs.StringVar(&k.expires, "expires", "", "expiry, RFC 3339 (e.g. 2026-12-31T00:00:00Z), or none")
	fs.Var(&k.allow, "allow", "client networks allowed to use the key (CIDR; repeat or comma-separate; none: any)")
}

// body adds the settings given on the command line to an admin request
// (only those set: an update leaves the others as they are). Amounts go as
// decimal text, never through a float.
func (k *keyFlags) body(fs *flag.FlagSet, in map[string]any) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "label":
			in["label"] = k.label
		case "limit-usd":
			in["limit_usd"] = k.limitUSD
		case "limit-reset":
			in["limit_reset"] = k.limitReset
		case "expires":
			in["expires"] = k.expires
		case "allow":
			allow := []string{}
			if !(len(k.allow.vals) == 1 && k.allow.vals[0] == "none") {
				allow = k.allow.vals
			}
			in["allow"] = allow
		}
	})
}

func runKeys(args []string) error {
	sub, rest, err := subcommand(args, "keys", "create", "list", "revoke", "update")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "gateway base URL")
	account := fs.String("account", "", "account id")
	route := fs.String("route", "", "route name, or auto")
	exclude := fs.String("exclude", "", "comma-separated models the key may not call")
	var settings keyFlags
	if sub == "create" || sub == "update" {
		settings.register(fs)
	}
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return exitCode(2)
	}
	if sub == "create" || sub == "list" {
		if err := noArgs("keys "+sub, pos); err != nil {
			return err
		}
	}
	c, err := newAdminClient(*server)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		return createKey(c, fs, *account, *route, *exclude, &settings)
	case "list":
		var out struct {
			Data []admin.KeyView `json:"data"`
		}
		if err := c.do("GET", "/admin/keys?account="+url.QueryEscape(*account), nil, &out); err != nil {
			return err
		}
		return printKeys(os.Stdout, out.Data)
	case "revoke":
		if len(pos) != 1 {
			return errors.New("usage: relay keys revoke KEY [-server URL] (the key's id, key_…, or the key itself, sk-…)")
		}
		var out admin.KeyView
		if err := c.do("POST", "/admin/keys/revoke", keyRef(pos[0]), &out); err != nil {
			return err
		}
		fmt.Printf("revoked %s\n", out.ID)
	case "update":
		return updateKey(c, fs, pos, &settings)
	}
	return nil
}

// keyRef names a key in an admin request: by the key itself (sk-…) or its id.
func keyRef(arg string) map[string]any {
	if strings.HasPrefix(arg, "sk-") {
		return map[string]any{"key": arg}
	}
	return map[string]any{"id": arg}
}

func createKey(c *adminClient, fs *flag.FlagSet, account, route, exclude string, settings *keyFlags) error {
	if account == "" || route == "" {
		return errors.New("keys create: -account and -route are required")
	}
	in := map[string]any{"account": account, "route": route}
	if exclude != "" {
		var ex []string
		for _, m := range strings.Split(exclude, ",") {
			if m = strings.TrimSpace(m); m != "" {
				ex = append(ex, m)
			}
		}
		in["exclude"] = ex
	}
	settings.body(fs, in)
	var out admin.KeyView
	if err := c.do("POST", "/admin/keys", in, &out); err != nil {
		return err
	}
	fmt.Println(out.Key)
	return nil
}

func updateKey(c *adminClient, fs *flag.FlagSet, pos []string, settings *keyFlags) error {
	if len(pos) != 1 {
		return errors.New("usage: relay keys update KEY [-label L] [-limit-usd 5] [-limit-reset monthly] [-expires 2026-12-31T00:00:00Z|none] [-allow CIDR|none] (KEY: the key's id, key_…, or the key itself, sk-…)")
	}
	in := keyRef(pos[0])
	settings.body(fs, in)
	if len(in) == 1 {
		return errors.New("keys update: nothing to change; give -label, -limit-usd, -limit-reset, -expires or -allow")
	}
	var out admin.KeyView
	if err := c.do("POST", "/admin/keys/update", in, &out); err != nil {
		return err
	}
	return printKeys(os.Stdout, []admin.KeyView{out})
}

// printKeys prints keys as a table: settings, then the current period's
// spend. "-" is none.
func printKeys(w io.Writer, keys []admin.KeyView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tROUTE\tLABEL\tLIMIT_USD\tRESET\tSPENT_USD\tHELD_USD\tREMAINING_USD\tEXPIRES\tALLOW\tEXCLUDE\tREVOKED\tCREATED")
	for _, k := range keys {
		expires := dash(k.Expires)
		if k.Expired {
			expires += " (expired)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", k.ID, k.Account, k.Route, dash(strconv.Quote(k.Label)),
			dash(k.LimitUSD), k.LimitReset, k.SpentUSD, k.HeldUSD, dash(k.RemainingUSD), expires,
			dash(strings.Join(k.Allow, ",")), dash(strings.Join(k.Exclude, ",")), k.Revoked, k.Created)
	}
	return tw.Flush()
}

// dash is s, or "-" when s is empty (or an empty quoted label).
func dash(s string) string {
	if s == "" || s == `""` {
		return "-"
	}
	return s
}

func runAccounts(args []string) error {
	sub, rest, err := subcommand(args, "accounts", "create", "credit", "balance", "charges", "list", "update", "login")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("accounts "+sub, flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "gateway base URL")
	account := fs.String("account", "", "account id")
	usd := fs.String("usd", "", "amount in USD, e.g. 1.50")
	limit := fs.Int("limit", 50, "charges: how many entries")
	alert := fs.String("alert-below-usd", "", "update: the low-balance threshold in USD (0: none)")
	email := fs.String("email", "", "login: the account holder's email address")
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return exitCode(2)
	}
	if err := noArgs("accounts "+sub, pos); err != nil {
		return err
	}
	if sub == "list" {
		c, err := newAdminClient(*server)
		if err != nil {
			return err
		}
		return listAccounts(c)
	}
	if *account == "" {
		return fmt.Errorf("accounts %s: -account is required", sub)
	}
	c, err := newAdminClient(*server)
	if err != nil {
		return err
	}
	acct := url.PathEscape(*account)
	var a admin.AccountView
	switch sub {
	case "create":
		if err := c.do("POST", "/admin/accounts", map[string]string{"id": *account}, &a); err != nil {
			return err
		}
		fmt.Printf("created account %s\n", a.ID)
	case "credit":
		if *usd == "" {
			return errors.New("accounts credit: -usd is required")
		}
		if err := c.do("POST", "/admin/accounts/"+acct+"/credit", map[string]string{"usd": *usd}, &a); err != nil {
			return err
		}
		fmt.Println(a.BalanceUSD)
	case "balance":
		if err := c.do("GET", "/admin/accounts/"+acct, nil, &a); err != nil {
			return err
		}
		fmt.Println(a.BalanceUSD)
	case "update":
		return updateAccount(c, acct, *alert)
	case "login":
		return issueLogin(c, os.Stdout, acct, *email)
	case "charges":
		var out struct {
			Data []admin.EntryView `json:"data"`
		}
		if err := c.do("GET", fmt.Sprintf("/admin/accounts/%s/charges?limit=%d", acct, *limit), nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tKIND\tREQUEST\tMODEL\tROUTE\tIN\tCACHED\tOUT\tAMOUNT_USD\tNOTE")
		for _, e := range out.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", e.Time.UTC().Format(time.RFC3339), e.Kind, e.RequestID,
				e.Model, e.Route, e.Usage.InputTokens, e.Usage.CacheReadTokens, e.Usage.OutputTokens, e.AmountText, e.Note)
		}
		return tw.Flush()
	}
	return nil
}

// updateAccount sets the account's low-balance threshold (decimal USD
// text, as given; 0 removes it).
func updateAccount(c *adminClient, acct, alert string) error {
	if alert == "" {
		return errors.New("accounts update: nothing to change; give -alert-below-usd")
	}
	var a admin.AccountView
	if err := c.do("POST", "/admin/accounts/"+acct+"/update", map[string]string{"alert_below_usd": alert}, &a); err != nil {
		return err
	}
	if a.AlertBelowUSD == "" {
		fmt.Printf("account %s: no low-balance alert\n", a.ID)
	} else {
		fmt.Printf("account %s: alert below %s USD (available %s USD)\n", a.ID, a.AlertBelowUSD, a.AvailableUSD)
	}
	return nil
}

// issueLogin gives the holder of email a console login on the account and
// prints its one-time set-password link (the first line, alone, for
// scripts) and when the link expires.
func issueLogin(c *adminClient, w io.Writer, acct, email string) error {
	if email == "" {
		return errors.New("accounts login: -email is required")
	}
	var l admin.LoginView
	if err := c.do("POST", "/admin/accounts/"+acct+"/login", map[string]string{"email": email}, &l); err != nil {
		return err
	}
	fmt.Fprintln(w, l.SetupLink)
	fmt.Fprintf(w, "one-time link for %s to set the password of its console login on account %s; it expires %s\n", l.Email, l.Account, l.Expires)
	return nil
}

// listAccounts prints every account, asking for a page at a time.
func listAccounts(c *adminClient) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBALANCE_USD\tHELD_USD\tAVAILABLE_USD\tALERT_BELOW_USD\tCREATED")
	after := ""
	for {
		var page struct {
			Data    []admin.AccountView `json:"data"`
			HasMore bool                `json:"has_more"`
		}
		if err := c.do("GET", "/admin/accounts?limit=500&after="+url.QueryEscape(after), nil, &page); err != nil {
			return err
		}
		for _, a := range page.Data {
			alert := dash(a.AlertBelowUSD)
			if a.BelowAlert {
				alert += " (below)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.BalanceUSD, a.HeldUSD, a.AvailableUSD, alert, a.Created)
		}
		if !page.HasMore || len(page.Data) == 0 {
			return tw.Flush()
		}
		after = page.Data[len(page.Data)-1].ID
	}
}
