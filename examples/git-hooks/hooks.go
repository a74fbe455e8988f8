// Package githooks carries the example git hooks (post-commit, post-checkout,
// post-merge) into the stepseq binary, so that `stepseq init --git-hooks` installs
// exactly the files this folder documents. It holds the files only; installing
// them, and chaining a hook the repository already had, is the command's job.
package githooks

import "embed"

// FS holds the hook scripts, each at its hook's name: post-commit, post-checkout
// and post-merge.
//
//go:embed post-*
var FS embed.FS
