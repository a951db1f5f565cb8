# funclen.awk: report C functions longer than MAX lines (default 80) that do
# not say why.  The code style puts a definition's opening and closing
# braces at column 0 (clang-format's Linux brace style), so a body runs from
# a line "{" to the next line starting with "}".  Length counts both braces.
# A function may be longer when a comment in it, or in the block directly
# above it, carries "long:" followed by the reason.
#   awk -f scripts/funclen.awk [-v max=N] [-v all=1] FILE...
# all=1 lists every function over MAX, marked or not (for measuring).
# allow=FILE names functions ("path name  reason" a line, # comments) that
# are exempt while their file is being reworked elsewhere.
# Exit status 1 when an unmarked function is over MAX.
BEGIN {
	if (max == "")
		max = 80
	bad = 0
	if (allow != "")
		while ((getline line < allow) > 0) {
			if (line ~ /^[ \t]*(#|$)/)
				continue
			split(line, w, /[ \t]+/)
			exempt[w[1] " " w[2]] = 1
		}
}
FNR == 1 {
	inbody = 0
	above = ""
	name = "?"
}
{
	if (!inbody) {
		if ($0 == "{") {
			inbody = 1
			start = FNR
			marked = (above ~ /long:/)
			if ((FILENAME " " name) in exempt)
				marked = 1
			next
		}
		# A blank line, or the end of a top-level declaration, ends
		# the block that is "directly above".
		if ($0 ~ /^[ \t]*$/ || $0 ~ /^}/ ||
		    $0 ~ /;[ \t]*$/ && $0 !~ /^([ \t]|\/\*)/) {
			above = ""
			name = "?"
			next
		}
		above = above "\n" $0
		if (match($0, /^[A-Za-z_][A-Za-z0-9_]*\(/))
			name = substr($0, 1, RLENGTH - 1)
		next
	}
	if ($0 ~ /long:/)
		marked = 1
	if ($0 ~ /^}/) {
		n = FNR - start + 1
		if (n > max && (all || !marked)) {
			printf "%s:%d: %s is %d lines (over %d)%s\n", FILENAME,
			    start, name, n, max, marked ? " [long: marked]" : ""
			if (!marked)
				bad = 1
		}
		inbody = 0
		above = ""
		name = "?"
	}
}
END {
	exit bad
}
