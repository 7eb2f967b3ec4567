# pflag --help text (upstream kube-controller-manager) -> section<TAB>flag<TAB>default, for hack/update-flag-inventory.sh.
function flush() { if (name != "") print section "\t" name "\t" def; name = "" }
/^[A-Z][A-Za-z -]* flags:$/ { flush(); section = $0; sub(/ flags:$/, "", section); next }
/^      --[a-z0-9-]+/ || /^  -[a-z], --[a-z0-9-]+/ {
	flush()
	line = $0; sub(/^  -[a-z], /, "      ", line); sub(/^      --/, "", line)
	split(line, parts, /[ =]/); name = parts[1]; def = ""
}
/\(default [^)]*\)$/ && name != "" {
	d = $0; sub(/.*\(default /, "", d); sub(/\)$/, "", d); gsub(/^"|"$/, "", d); gsub(/^\[|\]$/, "", d); def = d
}
END { flush() }
