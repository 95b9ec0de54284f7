package convert

import (
	"encoding/json"
	"fmt"
)

// JSON copies from into to through their JSON encoding: a typed object into
// its apply configuration or back, or any two types that share a wire
// format. Fields of from that to does not have are dropped.
func JSON(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return fmt.Errorf("encoding %T: %w", from, err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		return fmt.Errorf("decoding %T into %T: %w", from, to, err)
	}
	return nil
}
