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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelrelay/modelrelay/gateway"
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

func runKeys(args []string) error {
	sub, rest, err := subcommand(args, "keys", "create", "list", "revoke")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "gateway base URL")
	account := fs.String("account", "", "account id")
	route := fs.String("route", "", "route name, or auto")
	exclude := fs.String("exclude", "", "comma-separated models the key may not call")
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		return exitCode(2)
	}
	if sub != "revoke" {
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
		if *account == "" || *route == "" {
			return errors.New("keys create: -account and -route are required")
		}
		in := map[string]any{"account": *account, "route": *route}
		if *exclude != "" {
			var ex []string
			for _, m := range strings.Split(*exclude, ",") {
				if m = strings.TrimSpace(m); m != "" {
					ex = append(ex, m)
				}
			}
			in["exclude"] = ex
		}
		var out gateway.KeyView
		if err := c.do("POST", "/admin/keys", in, &out); err != nil {
			return err
		}
		fmt.Println(out.Key)
	case "list":
		var out struct {
			Data []gateway.KeyView `json:"data"`
		}
		if err := c.do("GET", "/admin/keys?account="+url.QueryEscape(*account), nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tACCOUNT\tROUTE\tEXCLUDE\tREVOKED\tCREATED")
		for _, k := range out.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", k.ID, k.Account, k.Route, strings.Join(k.Exclude, ","), k.Revoked, k.Created)
		}
		return tw.Flush()
	case "revoke":
		if len(pos) != 1 {
			return errors.New("usage: relay keys revoke KEY [-server URL] (the key's id, key_…, or the key itself, sk-…)")
		}
		in := map[string]string{"id": pos[0]}
		if strings.HasPrefix(pos[0], "sk-") {
			in = map[string]string{"key": pos[0]}
		}
		var out gateway.KeyView
		if err := c.do("POST", "/admin/keys/revoke", in, &out); err != nil {
			return err
		}
		fmt.Printf("revoked %s\n", out.ID)
	}
	return nil
}

func runAccounts(args []string) error {
	sub, rest, err := subcommand(args, "accounts", "create", "credit", "balance", "charges", "list")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("accounts "+sub, flag.ContinueOnError)
	server := fs.String("server", "http://127.0.0.1:8080", "gateway base URL")
	account := fs.String("account", "", "account id")
	usd := fs.String("usd", "", "amount in USD, e.g. 1.50")
	limit := fs.Int("limit", 50, "charges: how many entries")
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
	var a gateway.AccountView
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
	case "charges":
		var out struct {
			Data []gateway.EntryView `json:"data"`
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

// listAccounts prints every account, asking for a page at a time.
func listAccounts(c *adminClient) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tBALANCE_USD\tHELD_USD\tAVAILABLE_USD\tCREATED")
	after := ""
	for {
		var page struct {
			Data    []gateway.AccountView `json:"data"`
			HasMore bool                  `json:"has_more"`
		}
		if err := c.do("GET", "/admin/accounts?limit=500&after="+url.QueryEscape(after), nil, &page); err != nil {
			return err
		}
		for _, a := range page.Data {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.BalanceUSD, a.HeldUSD, a.AvailableUSD, a.Created)
		}
		if !page.HasMore || len(page.Data) == 0 {
			return tw.Flush()
		}
		after = page.Data[len(page.Data)-1].ID
	}
}
