# The checks' bookkeeping, sourced by the scripts of this directory: each check prints one line (ok,
# skip or FAIL, with the details of a failure indented under it), and the last line is the tally.
passed=0
failed=0
skipped=0

pass() { passed=$((passed + 1)); printf 'ok    %s\n' "$1"; }
skip() { skipped=$((skipped + 1)); printf 'skip  %s\n' "$1"; }
# fail DESCRIPTION [DETAILS]: details (command output) are indented under the line.
fail() {
    failed=$((failed + 1))
    printf 'FAIL  %s\n' "$1"
    [[ $# -gt 1 && -n $2 ]] && printf '%s\n' "$2" | sed 's/^/      | /'
    return 0
}
# tally: prints the last line; its status is 1 if anything failed.
tally() {
    echo
    [[ $skipped -gt 0 ]] && echo "($skipped check(s) skipped)"
    echo "$passed passed, $failed failed"
    [[ $failed -eq 0 ]]
}
