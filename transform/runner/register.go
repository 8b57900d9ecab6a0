package runner

// The operator families: a runner runs any operator of the catalogue.
import (
	_ "github.com/slogfeed/slogfeed/transform/expr"
	_ "github.com/slogfeed/slogfeed/transform/pack"
	_ "github.com/slogfeed/slogfeed/transform/pipes"
	_ "github.com/slogfeed/slogfeed/transform/sensor"
)
