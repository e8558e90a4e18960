# bash completion for timerctl(1), the timerd client.            -*- shell-script -*-
#
# Installed as $(PREFIX)/share/bash-completion/completions/timerctl, where bash-completion loads it
# on first use; or source it from ~/.bashrc. Completes verbs, global and per-verb flags, overlap
# and misfire policies, kill modes, I/O classes (--ionice), webhook methods, DST rules, time zones
# (from the tz database's zone.tab), owners (pid:), a program and files after "--" (add, exec;
# files for run's arguments), and job names, tags, modes and run_on tags from the running daemon
# (`timerctl --json list`, honouring a --socket already on the command line; nothing if the daemon
# cannot be reached). Needs no bash-completion helpers and no jq.
#
# Keep the lists in step with Sources/TimerdCLI/CLIVerb.swift and JobSpec.keys.

# The daemon's `--json list`, or nothing. $1: the timerctl to run; $2: socket or empty.
_timerctl_list_json() {
    local prog=$1 socket=$2
    local -a args=()
    [[ -n $socket ]] && args=(--socket "$socket")
    if command -v timeout >/dev/null 2>&1; then
        timeout 2 "$prog" "${args[@]}" --json list </dev/null 2>/dev/null
    else
        "$prog" "${args[@]}" --json list </dev/null 2>/dev/null
    fi
    return 0
}

# Job names from the daemon, one per line, or nothing. $1: the timerctl to run; $2: socket or empty.
_timerctl_job_names() {
    # Job names are [A-Za-z0-9_.-]: no escapes inside the quotes. "name" inside other strings
    # (output, options) is escaped as \"name\" and does not match.
    _timerctl_list_json "$1" "$2" | grep -o '"name":"[^"]*"' | cut -d'"' -f4
}

# The values of a job array key ("tags", "modes" or "run_on") over all jobs, one per line, sorted, unique.
# $1: the timerctl to run; $2: socket or empty; $3: the key. Tags and modes are [A-Za-z0-9_.-], like
# names: no commas, quotes or escapes inside.
# $4…: more values to add (e.g. the mode "default").
_timerctl_job_values() {
    {
        _timerctl_list_json "$1" "$2" | grep -o "\"$3\":\\[[^]]*\\]" | sed 's/^[^[]*\[//; s/\]$//' | tr ',' '\n' | tr -d '"'
        (($# > 3)) && printf '%s\n' "${@:4}"
    } | grep -v '^$' | sort -u
}

# IANA zone names from the tz database ($TZDIR, else /usr/share/zoneinfo), one per line, and UTC.
_timerctl_zones() {
    local dir=${TZDIR:-/usr/share/zoneinfo} tab
    {
        for tab in "$dir/zone1970.tab" "$dir/zone.tab"; do
            [[ -r $tab ]] && grep -v '^#' "$tab" | cut -f3
        done
        echo UTC
    } | grep -v '^$' | sort -u
}

_timerctl() {
    local verbs="add exec cancel pause resume run list show history why reload mode stats watch cluster next simulate import ping version help"
    local owner_flags="--owner --owner-pid --tag --modes"
    local webhook_flags="--webhook --method --header --body --content-type --expect --retries --retry-backoff --redirects --ca-file --insecure"
    local notify_flags="--on-failure --on-recovery"
    local calendar_flags="--cron --calendar --timezone --dst-gap --dst-repeat"
    local misfire_flags="--misfire --misfire-grace"
    # Resource control (docs/configuration.md): cgroup limits, priorities, the limit_* keys.
    local limit_flags="--limit-cpu --limit-fsize --limit-data --limit-stack --limit-core --limit-rss --limit-nproc --limit-nofile --limit-memlock --limit-as --limit-locks --limit-sigpending --limit-msgqueue --limit-nice --limit-rtprio --limit-rttime"
    local resource_flags="--memory-max --memory-high --memory-swap-max --cpu-quota --cpu-weight --io-weight --tasks-max --nice --ionice --oom-score-adj $limit_flags"
    # What counts as failure, and what it leads to (--fail-on-stderr is a switch: no value).
    local failure_flags="--success-exit-codes --fail-on-stderr --pause-after-failures --pool --log-file --log-max-size --log-keep --after --after-result"
    local stop_flags="--timeout --kill-grace --kill-mode"
    local job_flags="--every --start --in --at $calendar_flags --jitter --fixed-jitter $misfire_flags --count --leeway --command --argv $webhook_flags $stop_flags $resource_flags $failure_flags --overlap --env --meta --cwd --user --group $owner_flags $notify_flags --history-limit --cluster --run-on"
    local exec_flags="--start --interval --repeats --async --jitter --fixed-jitter $misfire_flags --count --leeway --command --argv $webhook_flags $stop_flags $resource_flags $failure_flags --env --meta --cwd --user --group $owner_flags $notify_flags --history-limit --cluster --run-on"
    local run_flags="--env --force"
    local resume_flags="--now --after"
    local next_flags="--cron --calendar --every --count --timezone --from --dst-gap --dst-repeat"
    local simulate_flags="--config --from --until --run-duration --run-result --down --clock-step --seed"
    # Flags that take a value (as the next word or after "="); not the switches (--fixed-jitter,
    # --fail-on-stderr, --repeats, --async, --force, --now, --json).
    local value_flags=" --socket --every --start --in --at --cron --calendar --timezone --dst-gap --dst-repeat --jitter --from --count --leeway --command --argv $stop_flags $resource_flags --success-exit-codes --pause-after-failures --pool --log-file --log-max-size --log-keep --after-result --overlap --env --meta --cwd --user --group --owner --owner-pid --tag --modes --interval --after $webhook_flags $notify_flags $misfire_flags --history-limit --cluster --run-on --limit --config --unit-path --until --run-duration --run-result --down --clock-step --seed --last "

    # COMP_WORDS splits "--flag=value" at "=" (COMP_WORDBREAKS): glue those pieces back together.
    local -a words=()
    local cword=0 i w n
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        n=${#words[@]}
        if ((n > 0)) && [[ $w == "=" && ${words[n-1]} == --[a-z]* && ${words[n-1]} != *=* ]]; then
            words[n-1]+="="
        elif ((n > 0 && i > 0)) && [[ ${COMP_WORDS[i-1]} == "=" && ${words[n-1]} == --*= ]]; then
            words[n-1]+=$w
        else
            words+=("$w")
        fi
        ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
    done
    local cur=${words[cword]} prev=
    ((cword > 0)) && prev=${words[cword-1]}

    # The timerctl being completed (a path such as .build/release/timerctl works too).
    local prog=${words[0]}
    prog=${prog/#\~/$HOME}
    [[ $prog == */* && -x $prog ]] || prog=timerctl

    # Scan the words before the cursor: the verb, a --socket, a --tag, the names given, a "--".
    local verb= socket= dashdash= tagged=
    local -a given=() after=()
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        if [[ -n $dashdash ]]; then
            given+=("$w")
            after+=("$w")
            continue
        fi
        case $w in
            --socket) ((i + 1 < cword)) && socket=${words[i+1]}; ((i++)) ;;
            --socket=*) socket=${w#--socket=} ;;
            --tag | --tag=*) tagged=1; [[ $w == --tag ]] && ((i++)) ;;
            --) [[ -n $verb ]] && dashdash=1 ;;
            --*=*) ;;
            -*) [[ $value_flags == *" $w "* ]] && ((i++)) ;;
            *) if [[ -z $verb ]]; then verb=$w; else given+=("$w"); fi ;;
        esac
    done
    socket=${socket/#\~/$HOME}

    COMPREPLY=()

    # A flag's value: "--flag VALUE" (prev is the flag) or "--flag=VALUE" (in cur).
    local flag= value=
    if [[ -z $dashdash && $cur == --*=* ]]; then
        flag=${cur%%=*}
        value=${cur#*=}
    elif [[ -z $dashdash && $value_flags == *" $prev "* ]]; then
        flag=$prev
        value=$cur
    fi
    if [[ -n $flag ]]; then
        # With "=" in COMP_WORDBREAKS readline replaces only the part after "="; else the whole word.
        local prefix=
        [[ $cur == --*=* && $COMP_WORDBREAKS != *=* ]] && prefix="$flag="
        case $flag in
            --overlap)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "skip queue allow replace" -- "$value") ;;
            --misfire)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "skip once all" -- "$value") ;;
            --kill-mode)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "control-group mixed process" -- "$value") ;;
            --ionice)
                # best-effort:N and realtime:N (N 0-7) are typed by hand.
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "idle best-effort realtime" -- "$value") ;;
            --method)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "GET POST PUT PATCH DELETE HEAD" -- "$value") ;;
            --insecure)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "yes no" -- "$value") ;;
            --dst-gap)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "shift skip" -- "$value") ;;
            --dst-repeat)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "first last both" -- "$value") ;;
            --timezone)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "$(_timerctl_zones)" -- "$value") ;;
            --owner)
                # owner=connection is refused by timerctl (its connection closes at once): pid:N only.
                compopt -o nospace 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "pid:" -- "$value") ;;
            --tag)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -W "$(_timerctl_job_values "$prog" "$socket" tags)" -- "$value") ;;
            --modes | --run-on)
                # A comma-separated list: complete its last element (modes; tags other jobs run on).
                local head=
                [[ $value == *,* ]] && head=${value%,*},
                local -a known=(modes default common)
                [[ $flag == --run-on ]] && known=(run_on)
                compopt -o nospace 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$prefix$head" \
                    -W "$(_timerctl_job_values "$prog" "$socket" "${known[@]}")" -- "${value##*,}") ;;
            --socket | --ca-file | --config)
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -f -- "$value") ;;
            --cwd | --unit-path)
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -d -- "$value") ;;
            --user)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -u -- "$value") ;;
            --group)
                mapfile -t COMPREPLY < <(compgen -P "$prefix" -g -- "$value") ;;
        esac
        return 0
    fi

    # Before the verb: global flags or a verb.
    if [[ -z $verb ]]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "--socket --json --help" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$verbs" -- "$cur")
        fi
        return 0
    fi

    # After "--" in add/exec: a program, then its arguments. In run: that run's arguments.
    if [[ -n $dashdash && ($verb == add || $verb == exec) ]]; then
        if ((${#after[@]} == 0)); then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
        else
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return 0
    fi
    if [[ -n $dashdash && $verb == run ]]; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
    fi

    if [[ $cur == -* && -z $dashdash ]]; then
        local flags="--socket --help"
        case $verb in
            next) flags="--help $next_flags --json" ;;  # computed locally: no --socket
            simulate) flags="--help $simulate_flags --json" ;;
            import) flags="--help --user --system --unit-path --force" ;;  # computed locally: no --socket
            add) flags+=" $job_flags" ;;
            exec) flags+=" $exec_flags --json" ;;
            cancel | pause | resume)
                # Job names or one --tag; --json matters only with --tag.
                if [[ -n $tagged ]]; then
                    flags+=" --json"
                elif ((${#given[@]} == 0)); then
                    flags+=" --tag --json"
                fi
                [[ $verb == resume ]] && flags+=" $resume_flags" ;;
            list) [[ -n $tagged ]] && flags+=" --json" || flags+=" --tag --json" ;;
            watch)
                # One job name or one --tag, or neither.
                [[ -z $tagged && ${#given[@]} -eq 0 ]] && flags+=" --tag"
                flags+=" --json" ;;
            history) flags+=" --limit --json" ;;
            why) flags+=" --last --json" ;;
            run) flags+=" $run_flags --json" ;;  # --env repeatable; "--" then this run's arguments
            show | reload | mode | stats | cluster | version) flags+=" --json" ;;
        esac
        mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
        return 0
    fi

    case $verb in
        import)
            # "crontab", then a file or directory; "systemd", then timer units (files, or the installed timers' names).
            if ((${#given[@]} == 0)); then
                mapfile -t COMPREPLY < <(compgen -W "crontab systemd" -- "$cur")
            elif [[ ${given[0]} == systemd ]]; then
                compopt -o filenames 2>/dev/null
                local timers
                timers=$(command ls /etc/systemd/system /run/systemd/system /lib/systemd/system /usr/lib/systemd/system 2>/dev/null | grep '\.timer$' | sort -u)
                mapfile -t COMPREPLY < <(compgen -f -X '!*.timer' -- "$cur"; compgen -d -- "$cur"; compgen -W "$timers" -- "$cur")
            elif ((${#given[@]} == 1)); then
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            fi ;;
        help)
            ((${#given[@]} == 0)) && mapfile -t COMPREPLY < <(compgen -W "$verbs" -- "$cur") ;;
        mode)
            # The modes the jobs name ("common" is not a mode to switch to).
            ((${#given[@]} == 0)) &&
                mapfile -t COMPREPLY < <(compgen -W "$(_timerctl_job_values "$prog" "$socket" modes default | grep -vx common)" -- "$cur") ;;
        run | show | history | why | watch | cancel | pause | resume)
            if [[ ($verb == run || $verb == show || $verb == history || $verb == why || $verb == watch) && ${#given[@]} -gt 0 ]]; then
                return 0
            fi
            # Names or --tag, not both.
            [[ -n $tagged ]] && return 0
            local names name g skip
            names=$(_timerctl_job_names "$prog" "$socket")
            [[ -z $names ]] && return 0
            local -a candidates=()
            while IFS= read -r name; do
                skip=
                for g in "${given[@]}"; do [[ $g == "$name" ]] && skip=1 && break; done
                [[ -z $skip && $name == "$cur"* ]] && candidates+=("$name")
            done <<<"$names"
            COMPREPLY=("${candidates[@]}") ;;
    esac
    return 0
} &&
    complete -F _timerctl timerctl
