package gateway

import "github.com/modelrelay/modelrelay/wire"

// maxModelID is the longest model id a relayed call may name: longer is
// 400 invalid_model, before the id is looked up, held or sent.
const maxModelID = wire.MaxModelID
