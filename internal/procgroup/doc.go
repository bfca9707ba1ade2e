// Package procgroup stops a started server and what it started: its
// process group (Set, Terminate, Kill; the command alone where there are
// no process groups), and on Linux the descendants that left the group,
// found by a mark in their environment (SignalMarked). The bench's
// cold-start step uses it.
package procgroup
