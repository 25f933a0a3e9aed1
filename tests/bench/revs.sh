# Shared by ab.sh and streamdrain.sh (sourced, not run): building two
# revisions of Warren to compare. They set root (the repository), work
# (a scratch folder) and remove the worktrees in their cleanup.

# build_revs builds old_rev into $work/old and new_rev (the work tree
# when empty) into $work/new, each from a worktree of its own.
build_revs() { # old_rev new_rev
	build_rev "$1" old
	if [ -n "$2" ]; then build_rev "$2" new; else (cd "$root" && go build -o "$work/new" ./cmd/warren); fi
}

build_rev() { # rev output
	local src="$work/src-$2"
	git -C "$root" worktree add --quiet --detach "$src" "$1"
	(cd "$src" && go build -o "$work/$2" ./cmd/warren)
}
