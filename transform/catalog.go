package transform

// Catalogue returns every registered operator with its documentation,
// example and the JSON Schema of its configuration.
func Catalogue() []OperatorInfo {
	specs := Specs()
	out := make([]OperatorInfo, 0, len(specs))
	for _, s := range specs {
		out = append(out, info(s))
	}
	return out
}
