import TimerdCore
import TimerdProtocol

/// The verbs of `timerctl`, with everything help and the parser need to know about each.
package enum CLIVerb: String, CaseIterable, Sendable {
    case add, exec, cancel, pause, resume, run, list, show, history, why, reload, mode, stats, watch, cluster, next, simulate, `import`, ping, version, help

    /// How many job names (positional words) a verb takes.
    package enum Names: Sendable {
        case none, one, oneOrMore
        /// `mode [NAME]`: at most one word, not a job name.
        case optionalOne
        /// `watch [NAME]`: at most one job name.
        case optionalJob
        /// `help [VERB]`: at most one word, a verb name.
        case optionalTopic
        /// `import crontab [FILE|-]`: what to import, then at most one file.
        case importSource
    }

    /// The protocol verb sent to timerd (the verb's own name, upper-cased); nil for `help`, `next`,
    /// `simulate` and `import`, which timerctl answers itself (they compute locally, so they work without a
    /// running timerd).
    package var wireVerb: Verb? {
        switch self {
        case .help, .next, .simulate, .import: nil
        default: Verb(word: rawValue)
        }
    }

    /// One line: what the verb does.
    package var abstract: String {
        switch self {
        case .add: "Add a job that runs a command or sends a webhook on a schedule."
        case .exec: "Add a job with a generated name, from a start and an interval; print its name."
        case .cancel: "Cancel jobs: remove them and their timers."
        case .pause: "Pause jobs: they do not fire until resumed."
        case .resume: "Resume paused jobs: on their schedule, now, or after a delay."
        case .run: "Run a job once now, outside its schedule."
        case .list: "List the jobs with their state, next fire and last run."
        case .show: "Show one job in detail, with its last run and output."
        case .history: "Show a job's finished runs, newest first: when, how long, with what result."
        case .why: "Show a job's last due fires, newest first, and what became of each: ran, or why not."
        case .reload: "Re-read the config files and apply the changes."
        case .mode: "Show or switch the daemon's mode (jobs not in it hold their fires)."
        case .stats: "Show the daemon's counters: jobs, runs, lateness percentiles, requests, memory, uptime."
        case .watch: "Follow what happens to jobs as it happens: fires, runs, skips, changes."
        case .cluster: "Show the cluster: this node's role, the members and their jobs, and etcd's health."
        case .next: "Print the next fire times of a cron, calendar or every schedule (computed locally)."
        case .simulate: "Show what a config's jobs would do over a span of time, decision by decision (computed locally)."
        case .import: "Print timerd config for the jobs of a crontab or systemd timers, to move them (computed locally)."
        case .ping: "Check that timerd answers."
        case .version: "Print the versions of timerctl and timerd."
        case .help: "Show help for timerctl or for one verb."
        }
    }

    /// The usage line(s), each without the leading `timerctl `.
    package var usage: [String] {
        switch self {
        case .add:
            [
                "add NAME (--every DUR [--start DUR] | --in DUR | --at TIME | --cron EXPR | --calendar SPEC)",
                "    (--command STRING | --argv WORDS | --webhook URL | -- PROGRAM [ARG…]) [OPTIONS]",
            ]
        case .exec:
            [
                "exec [--start DUR] [--interval DUR] [--repeats] [--async]",
                "    (--command STRING | --argv WORDS | --webhook URL | -- PROGRAM [ARG…]) [OPTIONS]",
            ]
        case .cancel: ["cancel (NAME… | --tag TAG) [--json]"]
        case .pause: ["pause (NAME… | --tag TAG) [--json]"]
        case .resume: ["resume (NAME… | --tag TAG) [--now | --after DUR] [--json]"]
        case .run: ["run NAME [--env NAME=VALUE]… [--force] [-- ARG…] [--json]"]
        case .list: ["list [--tag TAG] [--json]"]
        case .show: ["show NAME [--json]"]
        case .history: ["history NAME [--limit N] [--json]"]
        case .why: ["why NAME [--last N] [--json]"]
        case .reload: ["reload [--json]"]
        case .mode: ["mode [NAME] [--json]"]
        case .stats: ["stats [--json]"]
        case .watch: ["watch [NAME | --tag TAG] [--json]"]
        case .cluster: ["cluster [--json]"]
        case .next:
            [
                "next (--cron EXPR | --calendar SPEC | --every DUR) [--count N] [--timezone TZ] [--from TIME]",
                "    [--dst-gap shift|skip] [--dst-repeat first|last|both] [--json]",
            ]
        case .simulate:
            [
                "simulate --config FILE [--from TIME] --until TIME [--run-duration JOB=DUR]… [--run-result JOB=RESULT]…",
                "    [--down FROM..TO]… [--clock-step AT=OFFSET]… [--seed N] [--json]",
            ]
        case .import: ["import crontab [FILE | -] [--user NAME] [--system] [--force]", "import systemd UNIT.timer... [--unit-path DIR] [--force]"]
        case .ping: ["ping"]
        case .version: ["version [--json]"]
        case .help: ["help [VERB]"]
        }
    }

    /// Extra paragraph for the verb's help, if any (lines of at most ~100 characters).
    package var discussion: [String] {
        switch self {
        case .add:
            [
                "Give exactly one schedule and one action. Everything after -- is the program and its",
                "arguments, run without a shell. Each option is also a config file key: --kill-grace 10s",
                "is kill_grace=10s. --owner-pid $$ ties the job to the calling shell: it is cancelled when",
                "that process exits.",
            ]
        case .exec:
            [
                "Without --repeats the job fires once, --start (default 0s) from now; with --repeats it fires",
                "every --interval, the first time after --start. Runs queue behind a running one",
                "(overlap=queue) unless --async lets them overlap (overlap=allow).",
            ]
        case .cancel:
            [
                "Only jobs added at run time can be cancelled (for config jobs, edit the config and reload).",
                "Runs in progress are stopped as the job's kill_mode says (SIGTERM, then SIGKILL after kill_grace).",
            ] + [""] + Self.tagDiscussion("cancelled")
        case .pause: Self.tagDiscussion("paused")
        case .resume: ["Without --now or --after a job resumes on its schedule's next fire.", ""] + Self.tagDiscussion("resumed")
        case .run:
            [
                "Prints what happened to the fire: started, queued (behind a running one) or waiting (for a run slot).",
                "The job's overlap policy applies: a job with overlap=skip that is running refuses it, unless --force.",
                "--env and the words after -- are for this run only, and kept in its history: arguments follow a",
                "program job's own, and are $1, $2, … of a --command job's shell.",
            ]
        case .list:
            [
                "NEXT and LAST are relative to now; RESULT is the last run's result (exit code or signal),",
                "or held while a fire waits for a mode the job runs in (see 'timerctl mode').",
            ]
        case .history:
            [
                "timerd keeps each job's last runs (--history-limit, default \(Limits.defaultHistoryLimit)) in its state database,",
                "across restarts. SCHEDULED is when the fire was due (manual: started by 'timerctl run'),",
                "STARTED when the run began, both local times (with the date when not today); LATE is how",
                "long after SCHEDULED it started. RESULT shows a non-zero exit code or a webhook's HTTP status.",
            ]
        case .why:
            [
                "One line per due fire, newest first: SCHEDULED (local time), OUTCOME, RUN, LATE, DETAIL.",
                "OUTCOME is ran (DETAIL: the result, or running), or skipped, missed, held, queued or waiting,",
                "with the reason 'timerctl show' gives. timerd keeps each job's last \(Limits.fireRecordsKept) due fires in its state",
                "database, across restarts.",
            ]
        case .reload: ["Prints what changed. Jobs added at run time are not touched."]
        case .mode:
            [
                "Without NAME, prints the mode and the jobs whose fires it holds. With NAME, switches to",
                "that mode and prints the jobs whose held fires it released. A job fires in the modes of",
                "its --modes (default: default; common: every mode); in other modes its fires wait.",
            ]
        case .stats:
            [
                "lateness is how long after its scheduled time timerd handled a fire; exec is how long a",
                "run took from its start to its process running. Both are percentiles in milliseconds over",
                "the window timerd reports (e.g. the last 5m). memory is timerd's resident set size.",
            ]
        case .watch:
            [
                "Prints one line per event (fired, started, finished, skipped, added, cancelled, paused,",
                "resumed) of every job, of job NAME, or of the jobs tagged TAG, with its local time, until",
                "interrupted (Ctrl-C) or until timerd closes the watch (exit status 0, a note on stderr).",
            ]
        case .next:
            [
                "Prints the next N fire times strictly after --from (default now), one per line, as local time",
                "with its UTC offset in --timezone (default: the system zone), like systemd-analyze calendar",
                "--iterations=N. timerctl computes them itself, with the rules timerd uses; timerd need not",
                "run. A cron job at a fixed time that a DST change skips runs at the change, a calendar spec",
                "skips it; --dst-gap and --dst-repeat override that, as the job keys do.",
                "",
                "  $ timerctl next --count 2 --cron '0 9 * * 1-5' --timezone Europe/Berlin \\",
                "      --from 2026-03-27T00:00:00Z",
                "  2026-03-27T09:00:00+01:00",
                "  2026-03-30T09:00:00+02:00",
            ]
        case .simulate:
            [
                "Runs the config's jobs through timerd's own scheduling engine in virtual time, from --from",
                "(default now) to --until, and prints every decision in time order, one per line: TIME JOB",
                "EVENT [DETAIL]. Events: fire (a fire fell due), start and finish (a run), retry, skip, miss (a",
                "fire missed while timerd was down or late), hold (waiting for a mode), queue (waiting behind a",
                "run or for a run slot); and for timerd itself: stop, start (a --down span), clock.",
                "The reasons are the ones 'timerctl show' gives. Runs take --run-duration (default 0s) and end",
                "as --run-result says (default ok), so retries, chains and pause_after_failures show.",
                "--down FROM..TO: timerd is not running over that span (runs then going are stopped; each",
                "job's misfire policy applies when it starts again). --clock-step AT=OFFSET: the wall clock",
                "is set by OFFSET (e.g. -1h) at AT. Times are RFC 3339; the output is in UTC. The same input",
                "gives the same output (random jitter comes from --seed, default 0).",
                "",
                "  $ timerctl simulate --config /etc/timerd/timerd.conf --until 2026-04-01T00:00:00Z \\",
                "      --down 2026-03-29T00:30:00Z..2026-03-29T03:00:00Z --run-duration backup=40m",
            ]
        case .cluster:
            [
                "Only in cluster mode (a [cluster] section in timerd.conf; docs/cluster.md). Each shared job",
                "runs on one live member (its tags fitting the job's run_on); every node lists and changes them.",
                "While etcd is unavailable the node says so here, serves reads, and refuses changes to shared",
                "jobs (cluster-unavailable).",
            ]
        case .import:
            [
                "Reads a crontab(5) file (- or none: standard input) and prints a [job \"NAME\"] section for each",
                "of its jobs, which fires when cron would and runs what cron would run: the same schedule, time",
                "zone (CRON_TZ), environment, user, home directory and SHELL, the %-lines as standard input. A",
                "file under /etc/crontab or /etc/cron.d/ (or --system) has a user field; a directory",
                "/etc/cron.{hourly,daily,weekly,monthly} becomes one run-parts job. Comments carry over; a line",
                "that cannot be converted exactly stays as a comment saying why, with FILE:LINE: on stderr, and",
                "the status is 1 (0 with --force). Names come from the commands: see docs/migrating.md.",
                "",
                "import systemd reads each timer unit (a path, or a name looked up in /etc/systemd/system,",
                "/run/systemd/system, /lib/systemd/system, /usr/lib/systemd/system or --unit-path DIR), its",
                "service (Unit= or the same name) and their .d/*.conf drop-ins, and prints a job named after",
                "the timer: OnCalendar= as calendar (timerd computes it as systemd does), Persistent= as",
                "misfire = once, RandomizedDelaySec= as jitter, AccuracySec= as leeway, the ExecStart= lines",
                "(joined by && for Type=oneshot), User=, Environment=, WorkingDirectory=, Nice=, I/O and",
                "resource settings. What has no exact equivalent stays as a comment saying why, as above.",
            ]
        case .version: ["Prints timerctl's version, then asks timerd for its own."]
        case .show, .ping, .help: []
        }
    }

    /// With `--tag TAG`: the jobs it acted on, one per line (no jobs: a note on stderr, status 0).
    private static func tagDiscussion(_ done: String) -> [String] {
        [
            "With --tag, every job tagged TAG is \(done) and its name printed, one per line (no such",
            "job: a note on stderr, exit status 0). Give job names or --tag, not both.",
        ]
    }

    package var names: Names {
        switch self {
        case .add, .run, .show, .history, .why: .one
        case .cancel, .pause, .resume: .oneOrMore
        case .exec, .list, .reload, .stats, .cluster, .next, .simulate, .ping, .version: .none
        case .import: .importSource
        case .mode: .optionalOne
        case .watch: .optionalJob
        case .help: .optionalTopic
        }
    }

    /// True when `--tag TAG` may stand for the job names (`PAUSE tag=T`, `LIST tag=T`).
    package var selectsByTag: Bool {
        switch self {
        case .cancel, .pause, .resume, .list, .watch: true
        case .add, .exec, .run, .show, .history, .why, .reload, .mode, .stats, .cluster, .next, .simulate, .import, .ping, .version,
            .help: false
        }
    }

    /// True when the words after `--` are a program to run (else they are names, `--` only ending the flags).
    package var takesProgram: Bool { self == .add || self == .exec }

    /// The words after `--` are the request's argv: a program and its arguments (add, exec), or a run's
    /// own arguments (run).
    package var takesArgv: Bool { takesProgram || self == .run }

    /// True when `--json` changes what the verb prints (listed in its help).
    package var hasJSONOutput: Bool {
        switch self {
        case .exec, .run, .list, .show, .history, .why, .reload, .mode, .stats, .cluster, .watch, .next, .simulate, .version: true
        case .cancel, .pause, .resume: true  // with --tag
        case .add, .import, .ping, .help: false
        }
    }

    /// The `--json` line of the verb's help.
    package var jsonHelp: String {
        switch self {
        case .cancel, .pause, .resume: "With --tag: print the reply as JSON."
        case .watch: "Print each event as the JSON line timerd sends."
        case .next: "Print {\"times\":[…],\"timezone\":…}, as timerd's NEXT replies."
        case .history: "Print the runs as the JSON array timerd sends."
        case .why: "Print the fires as the JSON array timerd sends."
        case .simulate: "Print one JSON object per decision: at, job, event, scheduled, run, reason, result."
        default: Flag.json.help
        }
    }

    /// The verb's own flags (not `--json`, `--socket`, `--help`), in help order.
    package var flags: [Flag] {
        switch self {
        case .add:
            return Self.jobFlags(JobSpec.keys)
        case .exec:
            let own = [
                Flag(
                    name: "start", key: "start", kind: .value(placeholder: "DUR"),
                    help: "First fire DUR from now (default 0s)."),
                Flag(
                    name: "interval", key: "interval", kind: .value(placeholder: "DUR"),
                    help: "With --repeats: fire every DUR."),
                Flag(name: "repeats", key: "repeats", kind: .option(value: "yes"), help: "Fire every --interval, not once."),
                Flag(name: "async", key: "async", kind: .option(value: "yes"), help: "Let runs overlap instead of queueing."),
            ]
            // The schedule and overlap keys are what EXEC replaces with its own; it has no wall-clock schedules.
            let replaced: Set<String> = ["every", "start", "in", "at", "cron", "calendar", "timezone", "dst_gap", "dst_repeat", "overlap"]
            return own
                + Self.jobFlags(JobSpec.keys.filter { !replaced.contains($0) }).map { flag in
                    var flag = flag
                    if flag.name == "count" { flag.help = "With --repeats: stop after N runs." }
                    return flag
                }
        case .resume:
            return [
                Flag.tag("Resume every job tagged TAG instead of named ones."),
                Flag(name: "now", key: "", kind: .word("now"), help: "Fire once right away, then go on with the schedule."),
                Flag(
                    name: "after", key: "after", kind: .value(placeholder: "DUR"),
                    help: "Fire once DUR from now, then go on with the schedule."),
            ]
        case .run:
            return [
                Flag(name: "env", key: "env", kind: .value(placeholder: "NAME=VALUE"),
                     help: "Set an environment variable for this run, over the job's (repeatable)."),
                Flag(name: "force", key: "force", kind: .option(value: "yes"),
                     help: "Start it even when the job's overlap policy would refuse (alongside the running one)."),
            ]
        case .cancel: return [Flag.tag("Cancel every job tagged TAG instead of named ones.")]
        case .pause: return [Flag.tag("Pause every job tagged TAG instead of named ones.")]
        case .list: return [Flag.tag("List only the jobs tagged TAG.")]
        case .watch: return [Flag.tag("Watch only the jobs tagged TAG.")]
        case .history:
            return [
                Flag(
                    name: "limit", key: "limit", kind: .value(placeholder: "N"),
                    help: "Show the newest N runs (default \(ControlCommand.defaultHistoryLimit), at most \(Limits.maximumHistoryLimit))."),
            ]
        case .why:
            return [
                Flag(
                    name: "last", key: "limit", kind: .value(placeholder: "N"),
                    help: "Show the last N due fires (default \(ControlCommand.defaultWhyLimit), at most \(Limits.fireRecordsKept))."),
            ]
        case .next:
            return [
                Flag(jobKey: "cron"),
                Flag(jobKey: "calendar"),
                Flag(name: "every", key: "every", kind: .value(placeholder: "DUR"), help: "Times DUR apart, the first DUR after --from."),
                Flag(
                    name: "count", key: "count", kind: .value(placeholder: "N"),
                    help: "Print N times (default \(NextFireQuery.defaultCount), at most \(NextFireQuery.maximumCount))."),
                Flag(
                    name: "timezone", key: "timezone", kind: .value(placeholder: "TZ"),
                    help: "Compute and print in the IANA zone TZ (default: the system zone)."),
                Flag(
                    name: "from", key: "from", kind: .value(placeholder: "TIME"),
                    help: "Count from an RFC 3339 time, e.g. 2026-03-27T00:00:00Z (default: now)."),
                Flag(jobKey: "dst_gap"),
                Flag(jobKey: "dst_repeat"),
            ]
        case .simulate:
            return [
                Flag(name: "config", key: "config", kind: .value(placeholder: "FILE"), help: "The config file whose jobs to simulate."),
                Flag(
                    name: "from", key: "from", kind: .value(placeholder: "TIME"),
                    help: "Start at an RFC 3339 time (default: now), as if timerd started then."),
                Flag(name: "until", key: "until", kind: .value(placeholder: "TIME"), help: "End at an RFC 3339 time, or +DUR after --from (e.g. +30d)."),
                Flag(
                    name: "run-duration", key: "run_duration", kind: .value(placeholder: "JOB=DUR"),
                    help: "JOB's runs take DUR (default 0s; repeatable)."),
                Flag(
                    name: "run-result", key: "run_result", kind: .value(placeholder: "JOB=RESULT"),
                    help: "JOB's runs end ok (default), failed, timeout or killed (repeatable)."),
                Flag(
                    name: "down", key: "down", kind: .value(placeholder: "FROM..TO"),
                    help: "timerd is not running from FROM to TO, RFC 3339 times (repeatable)."),
                Flag(
                    name: "clock-step", key: "clock_step", kind: .value(placeholder: "AT=OFFSET"),
                    help: "At AT the wall clock is set by OFFSET, e.g. 2026-03-01T12:00:00Z=-1h (repeatable)."),
                Flag(name: "seed", key: "seed", kind: .value(placeholder: "N"), help: "Seed random jitter with N (default 0)."),
            ]
        case .import:
            return [
                Flag(name: "user", key: "user", kind: .value(placeholder: "NAME"),
                     help: "Run a per-user crontab's jobs as NAME, in NAME's home directory, as cron does."),
                Flag(name: "system", key: "system", kind: .option(value: "yes"),
                     help: "Read the system format (a user field after the schedule), whatever the file's path."),
                Flag(name: "unit-path", key: "unit_path", kind: .value(placeholder: "DIR"),
                     help: "systemd: look up unit names in DIR instead of systemd's unit directories."),
                Flag(name: "force", key: "force", kind: .option(value: "yes"),
                     help: "Exit 0 even when lines were left out (they are still printed as comments)."),
            ]
        case .show, .reload, .mode, .stats, .cluster, .ping, .version, .help:
            return []
        }
    }

    /// The flags for these job keys, with `--owner-pid` (a shorthand for `--owner pid:PID`) after `--owner`.
    private static func jobFlags(_ keys: [String]) -> [Flag] {
        keys.flatMap { key in key == "owner" ? [Flag(jobKey: key), Flag.ownerPID] : [Flag(jobKey: key)] }
    }
}
