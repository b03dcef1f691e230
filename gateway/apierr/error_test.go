package apierr

import (
	"reflect"
	"testing"

	"github.com/modelrelay/modelrelay/wire"
)

// A request body wire refuses is the 400 BadRequest makes of its field and
// message: the same code and the same text.
func TestFromWireError(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"model", "messages[0].role", "body", "questions.a b"} {
		we := &wire.Error{Field: field, Message: field + " is wrong: 100%"}
		if got, want := From(we), BadRequest(field, "%s", we.Message); !reflect.DeepEqual(got, want) || got.Message != we.Message {
			t.Errorf("From(%+v) = %+v, want %+v", we, got, want)
		}
	}
}
