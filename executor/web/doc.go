// Package web is the live page of a workspace: the plan as a graph coloured by
// phase, its steps with their tries, durations, blockers, last reports and log
// tails, and the notifications, served at / and kept current by server-sent
// events at /events.
//
// The page is whole without JavaScript: the server renders it with html/template
// from an embedded template and draws the graph as inline SVG. A short inline
// script only swaps in the fragments the event stream sends. There is no
// front-end build and nothing is fetched from elsewhere.
//
// The page shows a [View] that a [Source] hands it and re-reads the view when
// the source says it changed. [Workspace] is the Source of a workspace a
// sidecar runs: it reads the state file, the notifications feed and the logs
// from disk, and the sidecar pokes it after each state write and notification.
// The package launches nothing and writes no file.
package web
