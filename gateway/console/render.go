package console

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/store"
)

// page is what every template gets: the layout's parts and the page's Data.
type page struct {
	Title   string
	Session *store.Session
	Nav     string // the current section, for aria-current
	Data    any
}

// CSRF is the session's token for the page's forms.
func (p page) CSRF() string {
	if p.Session == nil {
		return ""
	}
	return p.Session.CSRF
}

type pageTemplate = template.Template

var pageNames = []string{"signin", "setup", "error", "overview", "keys", "calls", "prices", "accounts", "account", "lines"}

var funcs = template.FuncMap{
	"usd":   func(n pricing.Nano) string { return "$" + n.String() },
	"usd2":  usd2,
	"usage": usageText,
	"money": money,
	"expires": func(t time.Time) string {
		switch {
		case t.IsZero():
			return "never"
		case t.Equal(t.UTC().Truncate(24 * time.Hour)):
			return "end of " + t.UTC().AddDate(0, 0, -1).Format("2006-01-02") + " UTC"
		}
		return t.UTC().Format("2006-01-02 15:04") + " UTC"
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04") + " UTC"
	},
}

// money shows an amount exactly with at least two decimals: "$2.50",
// "$2.4999594", "$0.00".
func money(n pricing.Nano) string {
	s := n.String()
	switch i := strings.IndexByte(s, '.'); {
	case i < 0:
		s += ".00"
	case len(s)-i == 2:
		s += "0"
	}
	return "$" + s
}

// usd2 shows an amount to the cent, rounded toward zero, with a $:
// "$9.99". The exact figure is the title of the element it sits in.
func usd2(n pricing.Nano) string {
	neg := n < 0
	if neg {
		n = -n
	}
	cents := int64(n / 10_000_000)
	s := "$" + strconv.FormatInt(cents/100, 10) + "." + strconv.FormatInt(cents%100/10, 10) + strconv.FormatInt(cents%10, 10)
	if neg {
		return "−" + s
	}
	return s
}

func parsePages() (map[string]*pageTemplate, error) {
	out := map[string]*pageTemplate{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// render writes a page; the body is built first so that a template error
// is a clean 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.log.Error("console: template failed", "page", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// errorData is the error page.
type errorData struct {
	Status  int
	Message string
}

// fail shows err as an error page: an *Error's status and message, a
// store refusal's status, else a 500 whose cause is logged, not shown.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *store.Session, err error) {
	status := statusOf(err)
	msg := "Something went wrong on our side; try again."
	var e *Error
	switch {
	case errors.As(err, &e):
		msg = e.Message
	case status == http.StatusNotFound:
		msg = "There is no such page."
	case status == http.StatusServiceUnavailable:
		msg = "The store is unavailable right now; try again shortly."
		w.Header().Set("Retry-After", "1")
	case status == http.StatusConflict:
		msg = "That already exists."
	default:
		c.log.Error("console: request failed", "method", r.Method, "error", err.Error())
	}
	c.render(w, r, status, "error", page{Title: http.StatusText(status), Session: s, Data: errorData{Status: status, Message: msg}})
}
