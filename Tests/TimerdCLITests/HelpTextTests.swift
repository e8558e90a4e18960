import Testing
import TimerdCLI

/// Golden help texts: a change here should be a deliberate one (update docs/timerctl.md too).
@Suite("help text")
struct HelpTextTests {
    static let global = """
            Usage: timerctl [--socket PATH] [--json] VERB [ARG…]

            Control timerd, the timer daemon, over its Unix socket.

            Verbs:
              add       Add a job that runs a command or sends a webhook on a schedule.
              exec      Add a job with a generated name, from a start and an interval; print its name.
              cancel    Cancel jobs: remove them and their timers.
              pause     Pause jobs: they do not fire until resumed.
              resume    Resume paused jobs: on their schedule, now, or after a delay.
              run       Run a job once now, outside its schedule.
              list      List the jobs with their state, next fire and last run.
              show      Show one job in detail, with its last run and output.
              history   Show a job's finished runs, newest first: when, how long, with what result.
              why       Show a job's last due fires, newest first, and what became of each: ran, or why not.
              reload    Re-read the config files and apply the changes.
              mode      Show or switch the daemon's mode (jobs not in it hold their fires).
              stats     Show the daemon's counters: jobs, runs, lateness percentiles, requests, memory, uptime.
              watch     Follow what happens to jobs as it happens: fires, runs, skips, changes.
              cluster   Show the cluster: this node's role, the members and their jobs, and etcd's health.
              next      Print the next fire times of a cron, calendar or every schedule (computed locally).
              simulate  Show what a config's jobs would do over a span of time, decision by decision (computed locally).
              import    Print timerd config for the jobs of a crontab or systemd timers, to move them (computed locally).
              ping      Check that timerd answers.
              version   Print the versions of timerctl and timerd.
              help      Show help for timerctl or for one verb.

            Options:
              --socket PATH  Talk to timerd on PATH (default: see Socket below).
              --json         Print replies as JSON (exec, run, list, show, history, why, reload, mode, stats, cluster, watch, next, simulate, version, pause/resume/cancel --tag).
              -h, --help     Show help; 'timerctl help VERB' shows a verb's options.

            Socket: --socket, else $TIMERD_SOCKET, else /run/timerd/timerd.sock for root; for other users
            $XDG_RUNTIME_DIR/timerd/timerd.sock (/tmp/timerd-UID/timerd.sock without XDG_RUNTIME_DIR) if it exists,
            else /run/timerd/timerd.sock if that exists.

            Exit status: 0 success, 1 timerd (or next, simulate) refused the request or import left lines out, 2 usage error, 3 cannot reach timerd.

            """

    static let add = """
            Usage: timerctl add NAME (--every DUR [--start DUR] | --in DUR | --at TIME | --cron EXPR | --calendar SPEC)
                                (--command STRING | --argv WORDS | --webhook URL | -- PROGRAM [ARG…]) [OPTIONS]

            Add a job that runs a command or sends a webhook on a schedule.

            Give exactly one schedule and one action. Everything after -- is the program and its
            arguments, run without a shell. Each option is also a config file key: --kill-grace 10s
            is kill_grace=10s. --owner-pid $$ ties the job to the calling shell: it is cancelled when
            that process exits.

            Options:
              --every DUR                   Fire every DUR (e.g. 30s, 5m, 1h30m).
              --start DUR                   With --every: first fire after DUR (default: one interval).
              --in DUR                      Fire once, DUR from now.
              --at TIME                     Fire once at an RFC 3339 time (e.g. 2026-11-29T16:00:00Z).
              --cron EXPR                   Fire at the times of a crontab expression, e.g. '0 9 * * 1-5' or @daily.
              --calendar SPEC               Fire at the times of a systemd calendar spec, e.g. 'Mon..Fri 09:00'.
              --timezone TZ                 With --cron or --calendar: compute in this IANA zone (default: the system's).
              --dst-gap shift|skip          Times DST skips: run at the change or skip them (default: as cron/systemd).
              --dst-repeat first|last|both  Times DST repeats: run the first, the last or both (default: as cron/systemd).
              --jitter DUR                  Delay each fire by a random time up to DUR.
              --fixed-jitter                With --jitter: the same delay each fire (from the machine id and job name).
              --misfire skip|once|all       Fires missed while timerd was down or handled late: skip (default), run the latest once, or all.
              --misfire-grace DUR           A fire at most DUR late still runs; later it counts as missed (default 1m).
              --count N                     With --every, --cron or --calendar: stop after N runs.
              --leeway DUR                  Let the timer fire up to DUR late so wake-ups coalesce.
              --command STRING              Run STRING with /bin/sh -c.
              --argv WORDS                  Run a program without a shell, given as one quoted string.
              --webhook URL                 Send an HTTP(S) request to URL instead of running a command.
              --method METHOD               With --webhook: GET, POST (default), PUT, PATCH, DELETE or HEAD.
              --header HEADER               With --webhook: send HEADER, written 'Name: value' (repeatable).
              --body TEXT                   Request body, with {job} {run} {scheduled_at} {fired_at} {meta.KEY} filled in.
              --content-type TYPE           With --webhook: the body's Content-Type (default application/json).
              --expect STATUSES             With --webhook: statuses that count as success, e.g. 204,200-299 (default 2xx).
              --retries N                   Retry a failed attempt up to N times (0-10, default 0); a command's each as a run of its own.
              --retry-backoff DUR           Wait DUR/2 to DUR before the first retry, doubling per retry (default 1s).
              --redirects N                 With --webhook: follow up to N redirects (0-10, default 0: none followed).
              --ca-file PATH                Verify https servers with this PEM CA bundle (default: the system's CAs).
              --insecure yes|no             With --webhook: yes skips verifying the server's certificate (default no).
              --timeout DUR                 Stop a run that takes longer than DUR.
              --kill-grace DUR              Wait DUR between SIGTERM and SIGKILL (default 5s).
              --kill-mode MODE              What stopping a run signals: control-group (default: all it started), mixed or process.
              --memory-max SIZE             Kill the run when it uses more memory than SIZE (e.g. 512M; its cgroup's memory.max).
              --memory-high SIZE            Slow the run down and reclaim its memory above SIZE (its cgroup's memory.high).
              --memory-swap-max SIZE        Let the run use at most SIZE of swap (its cgroup's memory.swap.max).
              --cpu-quota PERCENT           Let the run use at most PERCENT of one CPU, e.g. 50% or 200% (its cgroup's cpu.max).
              --cpu-weight N                The run's share of CPU time against others, 1-10000 (default 100; its cgroup's cpu.weight).
              --io-weight N                 The run's share of disk time against others, 1-10000 (default 100; its cgroup's io.weight).
              --tasks-max N                 Let the run have at most N processes and threads at once (its cgroup's pids.max).
              --nice N                      Run at nice level N, -20 (first) to 19 (last); below 0 for root only.
              --ionice CLASS                I/O priority: idle, best-effort[:0-7] or realtime[:0-7] (realtime for root only).
              --oom-score-adj N             The run's OOM killer adjustment, -1000 (never) to 1000 (first); below timerd's for root only.
              --limit-cpu N[:HARD]          Limit the run's seconds of CPU time, soft[:hard] or infinity (RLIMIT_CPU).
              --limit-fsize N[:HARD]        Limit the run's bytes in one file written, soft[:hard] or infinity (RLIMIT_FSIZE).
              --limit-data N[:HARD]         Limit the run's bytes of data segment, soft[:hard] or infinity (RLIMIT_DATA).
              --limit-stack N[:HARD]        Limit the run's bytes of stack, soft[:hard] or infinity (RLIMIT_STACK).
              --limit-core N[:HARD]         Limit the run's bytes of a core dump (0: none), soft[:hard] or infinity (RLIMIT_CORE).
              --limit-rss N[:HARD]          Limit the run's bytes resident (ignored by Linux), soft[:hard] or infinity (RLIMIT_RSS).
              --limit-nproc N[:HARD]        Limit the run's processes of the user, soft[:hard] or infinity (RLIMIT_NPROC).
              --limit-nofile N[:HARD]       Limit the run's open files, soft[:hard] or infinity (RLIMIT_NOFILE).
              --limit-memlock N[:HARD]      Limit the run's bytes locked in memory, soft[:hard] or infinity (RLIMIT_MEMLOCK).
              --limit-as N[:HARD]           Limit the run's bytes of address space, soft[:hard] or infinity (RLIMIT_AS).
              --limit-locks N[:HARD]        Limit the run's file locks, soft[:hard] or infinity (RLIMIT_LOCKS).
              --limit-sigpending N[:HARD]   Limit the run's pending signals, soft[:hard] or infinity (RLIMIT_SIGPENDING).
              --limit-msgqueue N[:HARD]     Limit the run's bytes in POSIX message queues, soft[:hard] or infinity (RLIMIT_MSGQUEUE).
              --limit-nice N[:HARD]         Limit the run's nice ceiling (20 - nice), soft[:hard] or infinity (RLIMIT_NICE).
              --limit-rtprio N[:HARD]       Limit the run's real-time priority, soft[:hard] or infinity (RLIMIT_RTPRIO).
              --limit-rttime N[:HARD]       Limit the run's microseconds of real-time CPU, soft[:hard] or infinity (RLIMIT_RTTIME).
              --success-exit-codes LIST     Exit statuses that mean success, e.g. 0,3 or 0-2 (default 0).
              --fail-on-stderr              A run that writes anything to stderr fails, whatever its exit status.
              --pause-after-failures N      Pause the job after N failed runs in a row (resume starts counting again).
              --pool POOL                   Wait for a slot of this pool of the config ([pool "POOL"] max_running = N) to run.
              --log-file PATH               Append each run's output to PATH too, between header and trailer lines.
              --log-max-size SIZE           With --log-file: rotate the file once it reaches SIZE (default 10M).
              --log-keep N                  With --log-file: keep N rotated files, PATH.1 to PATH.N (0-100, default 5).
              --after JOB                   Also run when a run of JOB ends (as --after-result says); without a schedule, only then.
              --after-result RESULT         With --after: which runs of JOB trigger it: success (default), failure or any.
              --overlap POLICY              When still running at a fire: skip (default), queue, allow or replace.
              --env NAME=VALUE              Set an environment variable for the command (repeatable).
              --meta KEY=VALUE              Attach user info, passed as TIMERD_META_KEY (repeatable).
              --cwd PATH                    Run in directory PATH (absolute; default /).
              --user USER                   Run as USER (root only; other users' jobs always run as themselves).
              --group GROUP                 Run with primary group GROUP (root, or a group you are in).
              --owner OWNER                 Cancel the job when its owner goes away: pid:N (when process N exits).
              --owner-pid PID               Cancel the job when process PID exits (--owner pid:PID).
              --tag TAG                     Label the job, to pause, resume, cancel or list by tag (repeatable).
              --modes MODES                 Fire only in these daemon modes, comma-separated (default: default; common: every mode).
              --on-failure URL|CMD          When the job starts failing: POST to URL, or run CMD with /bin/sh -c (any job).
              --on-recovery URL|CMD         When the job succeeds again: POST to URL, or run CMD with /bin/sh -c (any job).
              --history-limit N             Keep the last N finished runs for 'timerctl history' (0-10000, default 100).
              --cluster yes|no              In cluster mode: share the job across nodes (default yes here, no in config files).
              --run-on TAG[,TAG]            In cluster mode: run the shared job only on nodes with every TAG ([cluster] tags).
              --socket PATH                 Talk to timerd on PATH (see 'timerctl --help').
              -h, --help                    Show this help.

            """

    static let resume = """
            Usage: timerctl resume (NAME… | --tag TAG) [--now | --after DUR] [--json]

            Resume paused jobs: on their schedule, now, or after a delay.

            Without --now or --after a job resumes on its schedule's next fire.

            With --tag, every job tagged TAG is resumed and its name printed, one per line (no such
            job: a note on stderr, exit status 0). Give job names or --tag, not both.

            Options:
              --tag TAG      Resume every job tagged TAG instead of named ones.
              --now          Fire once right away, then go on with the schedule.
              --after DUR    Fire once DUR from now, then go on with the schedule.
              --json         With --tag: print the reply as JSON.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let list = """
            Usage: timerctl list [--tag TAG] [--json]

            List the jobs with their state, next fire and last run.

            NEXT and LAST are relative to now; RESULT is the last run's result (exit code or signal),
            or held while a fire waits for a mode the job runs in (see 'timerctl mode').

            Options:
              --tag TAG      List only the jobs tagged TAG.
              --json         Print the reply as JSON.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let mode = """
            Usage: timerctl mode [NAME] [--json]

            Show or switch the daemon's mode (jobs not in it hold their fires).

            Without NAME, prints the mode and the jobs whose fires it holds. With NAME, switches to
            that mode and prints the jobs whose held fires it released. A job fires in the modes of
            its --modes (default: default; common: every mode); in other modes its fires wait.

            Options:
              --json         Print the reply as JSON.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let pause = """
            Usage: timerctl pause (NAME… | --tag TAG) [--json]

            Pause jobs: they do not fire until resumed.

            With --tag, every job tagged TAG is paused and its name printed, one per line (no such
            job: a note on stderr, exit status 0). Give job names or --tag, not both.

            Options:
              --tag TAG      Pause every job tagged TAG instead of named ones.
              --json         With --tag: print the reply as JSON.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let stats = """
            Usage: timerctl stats [--json]

            Show the daemon's counters: jobs, runs, lateness percentiles, requests, memory, uptime.

            lateness is how long after its scheduled time timerd handled a fire; exec is how long a
            run took from its start to its process running. Both are percentiles in milliseconds over
            the window timerd reports (e.g. the last 5m). memory is timerd's resident set size.

            Options:
              --json         Print the reply as JSON.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let history = """
            Usage: timerctl history NAME [--limit N] [--json]

            Show a job's finished runs, newest first: when, how long, with what result.

            timerd keeps each job's last runs (--history-limit, default 100) in its state database,
            across restarts. SCHEDULED is when the fire was due (manual: started by 'timerctl run'),
            STARTED when the run began, both local times (with the date when not today); LATE is how
            long after SCHEDULED it started. RESULT shows a non-zero exit code or a webhook's HTTP status.

            Options:
              --limit N      Show the newest N runs (default 20, at most 10000).
              --json         Print the runs as the JSON array timerd sends.
              --socket PATH  Talk to timerd on PATH (see 'timerctl --help').
              -h, --help     Show this help.

            """

    static let next = """
            Usage: timerctl next (--cron EXPR | --calendar SPEC | --every DUR) [--count N] [--timezone TZ] [--from TIME]
                                [--dst-gap shift|skip] [--dst-repeat first|last|both] [--json]

            Print the next fire times of a cron, calendar or every schedule (computed locally).

            Prints the next N fire times strictly after --from (default now), one per line, as local time
            with its UTC offset in --timezone (default: the system zone), like systemd-analyze calendar
            --iterations=N. timerctl computes them itself, with the rules timerd uses; timerd need not
            run. A cron job at a fixed time that a DST change skips runs at the change, a calendar spec
            skips it; --dst-gap and --dst-repeat override that, as the job keys do.

              $ timerctl next --count 2 --cron '0 9 * * 1-5' --timezone Europe/Berlin \\
                  --from 2026-03-27T00:00:00Z
              2026-03-27T09:00:00+01:00
              2026-03-30T09:00:00+02:00

            Options:
              --cron EXPR                   Fire at the times of a crontab expression, e.g. '0 9 * * 1-5' or @daily.
              --calendar SPEC               Fire at the times of a systemd calendar spec, e.g. 'Mon..Fri 09:00'.
              --every DUR                   Times DUR apart, the first DUR after --from.
              --count N                     Print N times (default 5, at most 10000).
              --timezone TZ                 Compute and print in the IANA zone TZ (default: the system zone).
              --from TIME                   Count from an RFC 3339 time, e.g. 2026-03-27T00:00:00Z (default: now).
              --dst-gap shift|skip          Times DST skips: run at the change or skip them (default: as cron/systemd).
              --dst-repeat first|last|both  Times DST repeats: run the first, the last or both (default: as cron/systemd).
              --json                        Print {"times":[…],"timezone":…}, as timerd's NEXT replies.
              -h, --help                    Show this help.

            """

    @Test("golden help of the verbs with tag and mode options", arguments: [
        (CLIVerb.resume, HelpTextTests.resume), (.list, HelpTextTests.list), (.mode, HelpTextTests.mode),
        (.pause, HelpTextTests.pause), (.stats, HelpTextTests.stats), (.next, HelpTextTests.next),
        (.history, HelpTextTests.history),
    ])
    func tagAndModeHelp(verb: CLIVerb, text: String) {
        #expect(HelpText.verb(verb) == text)
        #expect(runCLI(["help", verb.rawValue]).stdout == text)
    }

    @Test func execHelpListsTheNewJobFlags() {
        let text = HelpText.verb(.exec)
        for line in ["  --owner OWNER ", "  --owner-pid PID ", "  --tag TAG ", "  --modes MODES "] {
            #expect(text.contains(line), "\(line)")
        }
    }

    @Test func execHelpKeepsTheMisfireAndHistoryFlags() {
        let text = HelpText.verb(.exec)
        for line in ["  --misfire skip|once|all ", "  --misfire-grace DUR ", "  --history-limit N "] {
            #expect(text.contains(line), "\(line)")
        }
        #expect(CLIVerb.exec.flags.filter { ["misfire", "misfire_grace", "history_limit"].contains($0.key) }.map(\.name)
            == ["misfire", "misfire-grace", "history-limit"])
    }

    @Test func execHelpHasJitterButNoWallClockSchedule() {
        let text = HelpText.verb(.exec)
        for line in ["  --jitter DUR ", "  --fixed-jitter "] { #expect(text.contains(line), "\(line)") }
        for name in ["cron", "calendar", "timezone", "dst-gap", "dst-repeat"] {
            #expect(!text.contains("--\(name)"), "\(name)")
            #expect(!CLIVerb.exec.flags.contains { $0.name == name }, "\(name)")
        }
    }

    @Test func globalHelp() {
        #expect(HelpText.global() == Self.global)
        for arguments in [["--help"], ["-h"], ["help"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == Self.global)
            #expect(result.stderr == "")
            #expect(result.sent.isEmpty)
        }
    }

    @Test func addHelp() {
        #expect(HelpText.verb(.add) == Self.add)
        for arguments in [["add", "--help"], ["add", "-h"], ["help", "add"], ["add", "x", "--every", "1s", "--help"]] {
            let result = runCLI(arguments)
            #expect(result.status == 0)
            #expect(result.stdout == Self.add)
            #expect(result.sent.isEmpty)
        }
    }

    @Test("every verb has --help with its usage, abstract and flags", arguments: CLIVerb.allCases)
    func verbHelp(verb: CLIVerb) {
        let result = runCLI([verb.rawValue, "--help"])
        #expect(result.status == 0)
        let text = result.stdout
        if verb == .help {
            #expect(text == Self.global)
            return
        }
        #expect(text.hasPrefix("Usage: timerctl \(verb.rawValue)"))
        #expect(text.contains("\n\(verb.abstract)\n"))
        for flag in verb.flags { #expect(text.contains("  \(flag.synopsis)  "), "\(flag.synopsis)") }
        #expect(text.contains("  -h, --help"))
        #expect(text.hasSuffix("\n"))
    }

    @Test func everyVerbIsListedWithItsAbstract() {
        for verb in CLIVerb.allCases {
            #expect(Self.global.contains("  \(verb.rawValue)") && Self.global.contains(verb.abstract), "\(verb)")
            #expect(!verb.abstract.isEmpty && !verb.abstract.contains("\n"))
        }
    }

    @Test func flagDescriptionsAreOneLine() {
        for verb in CLIVerb.allCases {
            for flag in verb.flags { #expect(!flag.help.isEmpty && !flag.help.contains("\n"), "\(verb) \(flag.name)") }
        }
    }
}
