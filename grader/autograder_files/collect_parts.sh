# collect_parts FROM TO: copy each part file (PART_FILES) found below FROM into the flat folder TO:
# the shallowest file of that name, not in macOS's __MACOSX litter, not through a symbolic link.
# Says on stdout which file it took (prefixed with $SCRIPT), for the staff's log of the run.
collect_parts() {
    local from="$1" to="$2" name found _depth path
    for name in "${PART_FILES[@]}"; do
        found=""
        while IFS=$'\t' read -r -d '' _depth path; do
            found="$path"
            break
        done < <(find "$from" -type f -name "$name" -not -path '*/__MACOSX/*' -printf '%d\t%p\0' 2>/dev/null \
                 | sort -z -n)
        if [ -n "$found" ]; then
            cp -- "$found" "$to/$name"
            echo "$SCRIPT: $name: ${found#"$from/"}"
        else
            echo "$SCRIPT: $name: not in the submission"
        fi
    done
}
