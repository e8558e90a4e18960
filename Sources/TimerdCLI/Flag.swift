import TimerdCore

/// One `--flag` a verb accepts, and how it maps onto the request sent to timerd.
package struct Flag: Sendable, Equatable {
    /// How the flag's value reaches the request.
    package enum Kind: Sendable, Equatable {
        /// `--name VALUE` or `--name=VALUE` → the option `key=VALUE`.
        case value(placeholder: String)
        /// `--name VALUE` → the option `key=PREFIXVALUE` (`--owner-pid 42` → `owner=pid:42`).
        case prefixedValue(placeholder: String, prefix: String)
        /// `--name` → `key=value`; `--name=OTHER` → `key=OTHER` (booleans: `--repeats` → `repeats=yes`).
        case option(value: String)
        /// `--name` → the word `word`, given apart from the names (`resume --now`: RESUME's mode `now`); takes no value.
        case word(String)
    }

    /// The flag without its dashes, in kebab-case (`kill-grace`).
    package var name: String
    /// The protocol option key, in snake_case (`kill_grace`); unused for `.word`.
    package var key: String
    package var kind: Kind
    /// One line for `--help`.
    package var help: String

    package init(name: String, key: String, kind: Kind, help: String) {
        self.name = name
        self.key = key
        self.kind = kind
        self.help = help
    }

    /// The flag for a job key: `kill_grace` ↔ `--kill-grace`, with its placeholder and help line. A
    /// ``switchKeys`` key is a switch: `--fixed-jitter` sends `fixed_jitter=yes` (`--fixed-jitter=no` works).
    package init(jobKey key: String) {
        let limit = key.hasPrefix("limit_") ? ProcessLimit.Kind(rawValue: String(key.dropFirst(6))).map(Flag.limitHelp) : nil
        let (placeholder, help) = Flag.jobKeyHelp[key] ?? limit ?? ("VALUE", "Sets the job key \(key).")
        let kind: Kind = Flag.switchKeys.contains(key) ? .option(value: "yes") : .value(placeholder: placeholder)
        self.init(name: Flag.flagName(forKey: key), key: key, kind: kind, help: help)
    }

    /// `--name PLACEHOLDER` or `--name`, as shown in help.
    package var synopsis: String {
        switch kind {
        case .value(let placeholder), .prefixedValue(let placeholder, _): return "--\(name) \(placeholder)"
        case .option, .word: return "--\(name)"
        }
    }

    /// snake_case key → kebab-case flag name (`kill_grace` → `kill-grace`).
    package static func flagName(forKey key: String) -> String {
        String(key.map { $0 == "_" ? "-" : $0 })
    }

    /// kebab-case flag name → snake_case key (`kill-grace` → `kill_grace`).
    package static func key(forFlagName name: String) -> String {
        String(name.map { $0 == "-" ? "_" : $0 })
    }

    /// Yes/no job keys whose flag is a switch that sends `yes` (their placeholder is not shown).
    package static let switchKeys: Set<String> = ["fixed_jitter", "fail_on_stderr"]

    /// Placeholder and help line per job key (`JobSpec.keys`). A key missing here still becomes a flag,
    /// with a generic line; a test checks that every key has its own. An entry for a key that is not in
    /// `JobSpec.keys` is never looked up.
    static let jobKeyHelp: [String: (String, String)] = [
        "every": ("DUR", "Fire every DUR (e.g. 30s, 5m, 1h30m)."),
        "start": ("DUR", "With --every: first fire after DUR (default: one interval)."),
        "in": ("DUR", "Fire once, DUR from now."),
        "at": ("TIME", "Fire once at an RFC 3339 time (e.g. 2026-11-29T16:00:00Z)."),
        // Wall-clock schedules (docs/configuration.md).
        "cron": ("EXPR", "Fire at the times of a crontab expression, e.g. '0 9 * * 1-5' or @daily."),
        "calendar": ("SPEC", "Fire at the times of a systemd calendar spec, e.g. 'Mon..Fri 09:00'."),
        "timezone": ("TZ", "With --cron or --calendar: compute in this IANA zone (default: the system's)."),
        "dst_gap": ("shift|skip", "Times DST skips: run at the change or skip them (default: as cron/systemd)."),
        "dst_repeat": ("first|last|both", "Times DST repeats: run the first, the last or both (default: as cron/systemd)."),
        "jitter": ("DUR", "Delay each fire by a random time up to DUR."),
        "fixed_jitter": ("", "With --jitter: the same delay each fire (from the machine id and job name)."),
        // Missed fires and run history (docs/state.md).
        "misfire": ("skip|once|all", "Fires missed while timerd was down or handled late: skip (default), run the latest once, or all."),
        "misfire_grace": ("DUR", "A fire at most DUR late still runs; later it counts as missed (default \(DurationText.format(Limits.defaultMisfireGrace)))."),
        "history_limit": ("N", "Keep the last N finished runs for 'timerctl history' (0-\(Limits.maximumHistoryLimit), default \(Limits.defaultHistoryLimit))."),
        "cluster": ("yes|no", "In cluster mode: share the job across nodes (default yes here, no in config files)."),
        "run_on": ("TAG[,TAG]", "In cluster mode: run the shared job only on nodes with every TAG ([cluster] tags)."),
        "count": ("N", "With --every, --cron or --calendar: stop after N runs."),
        "leeway": ("DUR", "Let the timer fire up to DUR late so wake-ups coalesce."),
        "command": ("STRING", "Run STRING with /bin/sh -c."),
        "argv": ("WORDS", "Run a program without a shell, given as one quoted string."),
        "timeout": ("DUR", "Stop a run that takes longer than DUR."),
        "kill_grace": ("DUR", "Wait DUR between SIGTERM and SIGKILL (default \(DurationText.format(Limits.defaultKillGrace)))."),
        "kill_mode": ("MODE", "What stopping a run signals: control-group (default: all it started), mixed or process."),
        // What a run may use (docs/configuration.md, "Resource control").
        "memory_max": ("SIZE", "Kill the run when it uses more memory than SIZE (e.g. 512M; its cgroup's memory.max)."),
        "memory_high": ("SIZE", "Slow the run down and reclaim its memory above SIZE (its cgroup's memory.high)."),
        "memory_swap_max": ("SIZE", "Let the run use at most SIZE of swap (its cgroup's memory.swap.max)."),
        "cpu_quota": ("PERCENT", "Let the run use at most PERCENT of one CPU, e.g. 50% or 200% (its cgroup's cpu.max)."),
        "cpu_weight": ("N", "The run's share of CPU time against others, 1-10000 (default 100; its cgroup's cpu.weight)."),
        "io_weight": ("N", "The run's share of disk time against others, 1-10000 (default 100; its cgroup's io.weight)."),
        "tasks_max": ("N", "Let the run have at most N processes and threads at once (its cgroup's pids.max)."),
        "nice": ("N", "Run at nice level N, -20 (first) to 19 (last); below 0 for root only."),
        "ionice": ("CLASS", "I/O priority: idle, best-effort[:0-7] or realtime[:0-7] (realtime for root only)."),
        "oom_score_adj": ("N", "The run's OOM killer adjustment, -1000 (never) to 1000 (first); below timerd's for root only."),
        // What counts as failure (docs/configuration.md).
        "success_exit_codes": ("LIST", "Exit statuses that mean success, e.g. 0,3 or 0-2 (default 0)."),
        "fail_on_stderr": ("", "A run that writes anything to stderr fails, whatever its exit status."),
        "pause_after_failures": ("N", "Pause the job after N failed runs in a row (resume starts counting again)."),
        "log_file": ("PATH", "Append each run's output to PATH too, between header and trailer lines."),
        "log_max_size": ("SIZE", "With --log-file: rotate the file once it reaches SIZE (default 10M)."),
        "log_keep": ("N", "With --log-file: keep N rotated files, PATH.1 to PATH.N (0-100, default 5)."),
        "after": ("JOB", "Also run when a run of JOB ends (as --after-result says); without a schedule, only then."),
        "after_result": ("RESULT", "With --after: which runs of JOB trigger it: success (default), failure or any."),
        "pool": ("POOL", "Wait for a slot of this pool of the config ([pool \"POOL\"] max_running = N) to run."),
        "overlap": ("POLICY", "When still running at a fire: skip (default), queue, allow or replace."),
        "env": ("NAME=VALUE", "Set an environment variable for the command (repeatable)."),
        "meta": ("KEY=VALUE", "Attach user info, passed as TIMERD_META_KEY (repeatable)."),
        "cwd": ("PATH", "Run in directory PATH (absolute; default /)."),
        // Who the command runs as (docs/security.md).
        "user": ("USER", "Run as USER (root only; other users' jobs always run as themselves)."),
        "group": ("GROUP", "Run with primary group GROUP (root, or a group you are in)."),
        "owner": ("OWNER", "Cancel the job when its owner goes away: pid:N (when process N exits)."),
        "tag": ("TAG", "Label the job, to pause, resume, cancel or list by tag (repeatable)."),
        "modes": ("MODES", "Fire only in these daemon modes, comma-separated (default: default; common: every mode)."),
        // Webhook jobs and notifications (docs/webhooks.md).
        "webhook": ("URL", "Send an HTTP(S) request to URL instead of running a command."),
        "method": ("METHOD", "With --webhook: GET, POST (default), PUT, PATCH, DELETE or HEAD."),
        "header": ("HEADER", "With --webhook: send HEADER, written 'Name: value' (repeatable)."),
        "body": ("TEXT", "Request body, with {job} {run} {scheduled_at} {fired_at} {meta.KEY} filled in."),
        "content_type": ("TYPE", "With --webhook: the body's Content-Type (default application/json)."),
        "retries": ("N", "Retry a failed attempt up to N times (0-10, default 0); a command's each as a run of its own."),
        "retry_backoff": ("DUR", "Wait DUR/2 to DUR before the first retry, doubling per retry (default 1s)."),
        "expect": ("STATUSES", "With --webhook: statuses that count as success, e.g. 204,200-299 (default 2xx)."),
        "redirects": ("N", "With --webhook: follow up to N redirects (0-10, default 0: none followed)."),
        "ca_file": ("PATH", "Verify https servers with this PEM CA bundle (default: the system's CAs)."),
        "insecure": ("yes|no", "With --webhook: yes skips verifying the server's certificate (default no)."),
        "on_failure": ("URL|CMD", "When the job starts failing: POST to URL, or run CMD with /bin/sh -c (any job)."),
        "on_recovery": ("URL|CMD", "When the job succeeds again: POST to URL, or run CMD with /bin/sh -c (any job)."),
    ]

    /// The help line of a `limit_*` key (`limit_nofile`: RLIMIT_NOFILE, as systemd's `LimitNOFILE=`).
    static func limitHelp(_ kind: ProcessLimit.Kind) -> (String, String) {
        let what: String
        switch kind {
        case .cpu: what = "seconds of CPU time"
        case .fsize: what = "bytes in one file written"
        case .data: what = "bytes of data segment"
        case .stack: what = "bytes of stack"
        case .core: what = "bytes of a core dump (0: none)"
        case .rss: what = "bytes resident (ignored by Linux)"
        case .nproc: what = "processes of the user"
        case .nofile: what = "open files"
        case .memlock: what = "bytes locked in memory"
        case .as: what = "bytes of address space"
        case .locks: what = "file locks"
        case .sigpending: what = "pending signals"
        case .msgqueue: what = "bytes in POSIX message queues"
        case .nice: what = "nice ceiling (20 - nice)"
        case .rtprio: what = "real-time priority"
        case .rttime: what = "microseconds of real-time CPU"
        }
        return ("N[:HARD]", "Limit the run's \(what), soft[:hard] or infinity (RLIMIT_\(kind.rawValue.uppercased())).")
    }

    /// `--owner-pid PID`: `--owner pid:PID` for add and exec.
    package static let ownerPID = Flag(
        name: "owner-pid", key: "owner", kind: .prefixedValue(placeholder: "PID", prefix: "pid:"),
        help: "Cancel the job when process PID exits (--owner pid:PID).")

    /// `--tag TAG` of pause, resume, cancel and list: one tag instead of job names.
    static func tag(_ help: String) -> Flag {
        Flag(name: "tag", key: "tag", kind: .value(placeholder: "TAG"), help: help)
    }

    /// `--json`, accepted by every verb (shown in help only where it changes the output).
    static let json = Flag(name: "json", key: "", kind: .option(value: ""), help: "Print the reply as JSON.")
    /// `--socket PATH`, accepted by every verb.
    static let socket = Flag(
        name: "socket", key: "", kind: .value(placeholder: "PATH"), help: "Talk to timerd on PATH (see 'timerctl --help').")
}
