package guest

import (
	"errors"
	"fmt"

	"github.com/modelrelay/modelrelay/sdk/abi"
)

// Plugin is sdk.Plugin, whose doc says what each handler does:
// sdk.Register converts one into the other, so the two must keep the same
// fields.
type Plugin struct {
	Name      string
	Configure func(config []byte) error
	Describe  func() abi.Description
	Admit     func(req abi.AdmitRequest) (abi.AdmitResult, error)
	Settle    func(req abi.SettleRequest) (abi.SettleResult, error)
	Select    func(req abi.SelectRequest) (abi.SelectResult, error)
}

// registered is the plugin of this module; regErr the reason Register
// refused one, reported by every Call.
var (
	registered *Plugin
	regErr     error
)

// Register makes p the plugin this module serves (sdk.Register). A second
// registration or a plugin without a name is not a panic (a panic in init
// would kill the module before it can say why): every later Call fails
// with an internal error that names the problem, so the host refuses to
// load the plugin with that message.
func Register(p Plugin) {
	switch {
	case regErr != nil:
	case registered != nil:
		regErr = fmt.Errorf("sdk.Register called twice (plugins %q and %q)", registered.Name, p.Name)
	case p.Name == "":
		regErr = errors.New("sdk.Register: the plugin has no Name")
	default:
		registered = &p
	}
}

// Registered returns the plugin Register accepted, if any.
func Registered() (Plugin, bool) {
	if registered == nil || regErr != nil {
		return Plugin{}, false
	}
	return *registered, true
}

// Reset forgets the registration, so that a test can register a plugin of
// its own; restore puts the previous registration back.
func Reset() (restore func()) {
	oldP, oldErr := registered, regErr
	registered, regErr = nil, nil
	return func() { registered, regErr = oldP, oldErr }
}

// internal is a 500 error (sdk.Internal): the plugin or the host is at
// fault, not the request.
func internal(format string, args ...any) *abi.Error {
	return &abi.Error{Code: abi.CodeInternal, Message: fmt.Sprintf(format, args...)}
}

// Call runs op on input with the registered plugin and returns the result
// envelope (abi.DecodeResult). It is the dispatch of both builds: the wasm
// export mr_call and native tests (sdktest) go through it. A panic in a
// handler is recovered into an internal error "plugin NAME panicked: …".
func Call(op abi.Op, input []byte) []byte { return AppendCall(nil, op, input) }

// AppendCall is Call appending the envelope to dst, so that a caller can
// reuse one buffer.
func AppendCall(dst []byte, op abi.Op, input []byte) []byte {
	return appendCall(dst, op, input, nil)
}

// decodeCache holds, per operation, the strings of the last request decoded
// (abi.Strings), so that a guest's calls, whose endpoint, model and route
// nearly always repeat, decode without allocating. The wasm export keeps one
// (a guest instance runs one call at a time); AppendCall, which may run
// concurrently in native tests, passes none.
type decodeCache struct {
	admit, settle, sel abi.Strings
}

func appendCall(dst []byte, op abi.Op, input []byte, cache *decodeCache) (out []byte) {
	if regErr != nil {
		return abi.AppendError(dst, internal("%v", regErr))
	}
	p := registered
	if p == nil {
		return abi.AppendError(dst, internal("no plugin registered: call sdk.Register from init"))
	}
	defer func() {
		if v := recover(); v != nil {
			out = abi.AppendError(dst, internal("plugin %s panicked: %v", p.Name, v))
		}
	}()
	return p.dispatch(dst, op, input, cache)
}

func (p *Plugin) dispatch(dst []byte, op abi.Op, input []byte, cache *decodeCache) []byte {
	var admitStrs, settleStrs, selStrs *abi.Strings
	if cache != nil {
		admitStrs, settleStrs, selStrs = &cache.admit, &cache.settle, &cache.sel
	}
	switch op {
	case abi.OpConfigure:
		if p.Configure == nil {
			if len(input) > 0 {
				return abi.AppendError(dst, internal("plugin %s takes no configuration, but was given %d bytes", p.Name, len(input)))
			}
			return abi.AppendOK(dst)
		}
		if err := p.Configure(input); err != nil {
			return abi.AppendError(dst, p.asError("configure", err))
		}
		return abi.AppendOK(dst)
	case abi.OpDescribe:
		d := p.describe()
		return d.AppendTo(abi.AppendOK(dst))
	case abi.OpAdmit:
		if p.Admit == nil {
			return p.missing(dst, "admit")
		}
		var req abi.AdmitRequest
		if err := req.DecodeReusing(input, admitStrs); err != nil {
			return p.badInput(dst, err)
		}
		res, err := p.Admit(req)
		if err != nil {
			return abi.AppendError(dst, p.asError("admit", err))
		}
		return res.AppendTo(abi.AppendOK(dst))
	case abi.OpSettle:
		if p.Settle == nil {
			return p.missing(dst, "settle")
		}
		var req abi.SettleRequest
		if err := req.DecodeReusing(input, settleStrs); err != nil {
			return p.badInput(dst, err)
		}
		res, err := p.Settle(req)
		if err != nil {
			return abi.AppendError(dst, p.asError("settle", err))
		}
		return res.AppendTo(abi.AppendOK(dst))
	case abi.OpSelect:
		if p.Select == nil {
			return p.missing(dst, "select")
		}
		var req abi.SelectRequest
		if err := req.DecodeReusing(input, selStrs); err != nil {
			return p.badInput(dst, err)
		}
		res, err := p.Select(req)
		if err != nil {
			return abi.AppendError(dst, p.asError("select", err))
		}
		return res.AppendTo(abi.AppendOK(dst))
	default:
		return abi.AppendError(dst, internal("plugin %s: unknown op %d", p.Name, uint32(op)))
	}
}

// describe is Describe with Name and Implements filled in.
func (p *Plugin) describe() abi.Description {
	var d abi.Description
	if p.Describe != nil {
		d = p.Describe()
	}
	if d.Name == "" {
		d.Name = p.Name
	}
	if len(d.Implements) == 0 {
		if p.Admit != nil {
			d.Implements = append(d.Implements, abi.CapValidate, abi.CapQuote)
		}
		if p.Settle != nil {
			d.Implements = append(d.Implements, abi.CapPrice)
		}
		if p.Select != nil {
			d.Implements = append(d.Implements, abi.CapSelect)
		}
	}
	return d
}

func (p *Plugin) missing(dst []byte, op string) []byte {
	return abi.AppendError(dst, internal("plugin %s does not implement %s", p.Name, op))
}

func (p *Plugin) badInput(dst []byte, err error) []byte {
	return abi.AppendError(dst, internal("plugin %s: malformed input from the host: %v", p.Name, err))
}

// asError keeps a handler's *abi.Error as it is and wraps anything else as
// an internal error naming the plugin and the operation.
func (p *Plugin) asError(op string, err error) *abi.Error {
	var ae *abi.Error
	if errors.As(err, &ae) && ae != nil {
		return ae
	}
	return internal("plugin %s %s: %v", p.Name, op, err)
}
