// Package stability judges whether a benchmark cell ran in steady state,
// from its successful requests: it tests the length-normalised latency for
// a drift over the span (Theil-Sen slope with Sen's interval, Mann-Kendall
// test corrected for serial correlation), not the scatter of window
// medians. A span is stable when a 25% drift would have been caught with
// 95% probability and none was found; unstable when a drift of at least
// 10% is significant at 0.5% (or the queue says the server fell behind);
// otherwise not judged, with the span it would need.
//
// Judge gives the verdict, Extend says whether a span should run on,
// Need sizes a span before it runs, Overload reads the queue's counts.
// README.md gives the derivation and the measured rates, reproduced by
//
//	go test -count=1 -v -run 'Stationary|Growing|Overloaded|Issue|Strong' ./bench/stability/
//
// The package imports only the standard library and has no state.
package stability
