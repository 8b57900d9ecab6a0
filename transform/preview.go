package transform

import "encoding/json"

// PreviewItems is how many items of each node a Preview shows.
const PreviewItems = 50

// Preview is the output of every node of a pipe for its current inputs,
// computed without saving anything.
type Preview struct {
	// Nodes are in the order the pipe runs them.
	Nodes []NodeOutput `json:"nodes"`
	// Output is what the pipe would republish (at most PreviewItems).
	Output []Item `json:"output"`
	// Truncated is set when Output shows fewer items than PreviewItems
	// although the output has more: the preview's items together may
	// take at most Limits.MaxPreviewBytes.
	Truncated bool `json:"truncated,omitempty"`
	// Error is the run's error, if it failed (the nodes before the
	// failing one still show their output).
	Error string `json:"error,omitempty"`
}

// NodeOutput is one node's output in a Preview.
type NodeOutput struct {
	Node  string `json:"node"`
	Op    string `json:"op"`
	Count int    `json:"count"` // items emitted (Items holds at most PreviewItems)
	Items []Item `json:"items"`
	// Truncated is set when Items shows fewer than PreviewItems items
	// although Count is larger: past Limits.MaxPreviewBytes a preview
	// shows counts, not items.
	Truncated bool    `json:"truncated,omitempty"`
	Error     string  `json:"error,omitempty"`
	TookS     float64 `json:"took_s"`
}

// OperatorInfo is one entry of the operator catalogue.
type OperatorInfo struct {
	Name      string          `json:"name"`
	Family    Family          `json:"family"`
	Doc       string          `json:"doc"`
	Example   json.RawMessage `json:"example"`
	MinInputs int             `json:"min_inputs"`
	MaxInputs int             `json:"max_inputs"` // -1: any number
	// Schema is the JSON Schema (draft 2020-12) of the configuration.
	Schema json.RawMessage `json:"schema"`
}
