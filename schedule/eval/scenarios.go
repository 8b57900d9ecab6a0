package eval

// All returns every scenario `slogfeed eval` knows, in the order `slogfeed
// eval --help` lists them.
func All() []Scenario {
	return []Scenario{
		FixedSweep(),
		LossSweep(),
		Bimodal(),
		MDPT(),
		Trace(),
		ColdStart(),
		ColdTrace(),
		Sleep(),
		Groups(),
		Budget(),
		Scale(),
	}
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, s := range All() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}
