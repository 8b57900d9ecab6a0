// Package all registers every plugin that ships with slogfeed: import it
// for its side effects.
//
//	import _ "github.com/slogfeed/slogfeed/plugins/all"
package all
