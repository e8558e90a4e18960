import Testing
import TimerdConfig
import TimerdCore

@Suite("Sections, daemon keys and job keys")
struct SectionTests {
    @Test func sectionHeaderErrors() {
        let text = """
            [jobs]
            every = 1s
            [job hello]
            every = 1s
            command = true
            [job]
            [job 'x']
            every = 1s
            command = true
            [daemon "main"]
            [job "bad name!"]
            every = 1s
            command = true
            [job "ok"]
            every = 1s
            command = true
            """
        #expect(problems(text) == [
            at(1, "unknown section [jobs] (expected [daemon], [cluster], [pool \"NAME\"] or [job \"NAME\"])"),
            at(3, "the job name must be in double quotes: write [job \"hello\"]"),
            at(6, "[job] needs a name: write [job \"NAME\"]"),
            at(6, "a schedule is required: every=DUR, in=DUR, at=TIME, cron=EXPR, calendar=SPEC, or after=JOB"),
            at(6, "an action is required: command=STRING, argv=WORDS or webhook=URL"),
            at(7, "the job name must be in double quotes: write [job \"x\"]"),
            at(10, "[daemon] takes no name: write [daemon]"),
            at(11, "invalid job name \"bad name!\": only letters, digits, '_', '.' and '-' are allowed"),
        ])
    }

    @Test func poolsAndTheJobsInThem() throws {
        let config = try ConfigLoader.parse("""
            [pool "heavy"]
            max_running = 2

            [job "backup"]
            every = 1h
            pool = heavy
            command = true
            """)
        #expect(config.settings.pools == ["heavy": 2])
        #expect(config.jobs[0].spec.pool == "heavy")
        #expect(problems("""
            [pool "heavy"]
            max_running = 0
            colour = red
            [pool "heavy"]
            [pool light]
            [pool "idle"]
            [job "x"]
            every = 1h
            pool = nope
            command = true
            """) == [
            at(2, "max_running: expected a whole number of runs at once from 1 to 1000000, got \"0\""),
            at(3, "unknown key \"colour\" in [pool \"heavy\"] (a pool takes max_running)"),
            at(4, "pool \"heavy\" is already declared at \(mainPath):1"),
            at(5, "[pool] needs a name in double quotes: write [pool \"NAME\"]"),
            at(6, "[pool \"idle\"] needs max_running = N (the most runs of its jobs at once)"),
            at(7, "pool: no pool named \"nope\" (declare it: [pool \"nope\"] with max_running = N)"),
        ])
    }

    @Test func chainsNameJobsOfTheConfigAndDoNotGoRound() throws {
        let config = try ConfigLoader.parse("""
            [job "a"]
            every = 1h
            command = true

            [job "b"]
            after = a
            after_result = any
            command = true
            """)
        #expect(config.jobs[1].spec.after?.rawValue == "a" && config.jobs[1].spec.schedule == .triggered)
        #expect(problems("""
            [job "x"]
            after = nope
            command = true
            [job "c"]
            after = d
            command = true
            [job "d"]
            after = e
            command = true
            [job "e"]
            after = c
            command = true
            [job "self"]
            after = self
            command = true
            """) == [
            at(1, "after: no job named nope in the config (after= names a job declared in it)"),
            at(4, "after: a cycle of jobs that follow each other: c → d → e → c"),
            // The section is checked without its bad key too: then it has no schedule.
            at(13, "a schedule is required: every=DUR, in=DUR, at=TIME, cron=EXPR, calendar=SPEC, or after=JOB"),
            at(14, "after: a job cannot follow itself"),
        ])
    }

    @Test func sectionsWithUnusableNamesStillHaveTheirKeysChecked() {
        #expect(problems("[job \"\"]\nevery = soon\ncommand = true\n") == [
            at(1, "invalid job name \"\": must be 1 to 64 characters"),
            at(2, "every: invalid duration \"soon\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
        ])
    }

    @Test func daemonSettings() throws {
        let relative = try #require(configuration("[daemon]\nsocket = ./run//timerd.sock\nstop_grace = 250ms\n"))
        #expect(relative.settings.socket == "/etc/timerd/run/timerd.sock")
        #expect(relative.settings.stopGrace == .milliseconds(250))
        #expect(relative.settings.maxRunning == Limits.defaultMaxRunning)
        let absolute = try #require(configuration("[daemon]\nsocket = /tmp/t.sock\nstop_grace = 0\nmax_running = 1\n"))
        #expect(absolute.settings == DaemonSettings(socket: "/tmp/t.sock", maxRunning: 1, stopGrace: .zero))
        // A main file given by a relative path keeps relative paths relative to its directory.
        let fromRelative = try ConfigLoader.parse("[daemon]\nsocket = s.sock\n", path: "conf/timerd.conf")
        #expect(fromRelative.settings.socket == "conf/s.sock")
        let bare = try ConfigLoader.parse("[daemon]\nsocket = s.sock\n", path: "timerd.conf")
        #expect(bare.settings.socket == "s.sock")
    }

    @Test func daemonKeyErrors() {
        let text = """
            [daemon]
            max_running = 0
            max_running = 4
            stop_grace = forever
            socket =
            max-running = 3
            stop_grac = 1s
            every = 5s
            colour = blue
            include =
            [daemon]
            socket = /x
            """
        #expect(problems(text) == [
            at(2, "max_running: expected a whole number ≥ 1, got \"0\""),
            at(3, "max_running is given more than once (first at line 2)"),
            at(4, "stop_grace: invalid duration \"forever\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(5, "socket: empty path"),
            at(6, "unknown key \"max-running\" in [daemon] (did you mean max_running?)"),
            at(7, "unknown key \"stop_grac\" in [daemon] (did you mean stop_grace?)"),
            at(8, "unknown key \"every\" in [daemon] (job keys belong in a [job \"NAME\"] section)"),
            at(9, "unknown key \"colour\" in [daemon]"),
            at(10, "include: empty pattern"),
            at(11, "[daemon] is given more than once (first at line 1)"),
            at(12, "socket is given more than once (first at line 5)"),
        ])
    }

    @Test func maxRunningMustBePlainDigits() {
        #expect(problems("[daemon]\nmax_running = +5\n") == [at(2, "max_running: expected a whole number ≥ 1, got \"+5\"")])
        #expect(problems("[daemon]\nmax_running = 99999999999999999999999\n") == [
            at(2, "max_running: expected a whole number ≥ 1, got \"99999999999999999999999\"")
        ])
    }

    @Test func unknownJobKeysGetSuggestions() {
        let text = """
            [job "a"]
            evry = 5s
            every = 5s
            kill-grace = 2s
            Command = true
            command = true
            max_running = 3
            frobnicate = yes
            """
        #expect(problems(text) == [
            at(2, "unknown key \"evry\" (did you mean every?)"),
            at(4, "unknown key \"kill-grace\" (did you mean kill_grace?)"),
            at(5, "unknown key \"Command\" (did you mean command?)"),
            at(7, "unknown key \"max_running\" (max_running belongs in the [daemon] section)"),
            at(8, "unknown key \"frobnicate\""),
        ])
    }

    @Test func repeatedKeys() throws {
        let text = """
            [job "a"]
            every = 5s
            command = true
            env = A=1
            every = 6s
            env = B=2
            meta = k=v
            meta = other=w
            command = false
            """
        #expect(problems(text) == [
            at(5, "every is given more than once (first at line 2)"),
            at(9, "command is given more than once (first at line 3)"),
        ])
        let config = try #require(configuration("[job \"a\"]\nevery = 5s\nenv = A=1\nenv = A=2\nmeta = k=v\nmeta = j=w\ncommand = true\n"))
        #expect(config.jobs[0].spec.env == [KeyValue("A", "1"), KeyValue("A", "2")])
        #expect(config.jobs[0].spec.meta == [KeyValue("k", "v"), KeyValue("j", "w")])
    }

    @Test func errorsInRepeatedKeysPointAtTheOffendingOccurrence() {
        let text = """
            [job "a"]
            every = 5s
            command = true
            env = GOOD=1
            env = TIMERD_JOB=x
            env = ALSO_GOOD=2
            env = no-equals
            meta = Owner=a
            meta = other=b
            meta = OWNER=c
            """
        #expect(problems(text) == [
            at(5, "env: TIMERD_JOB is reserved (TIMERD_* variables are set by timerd)"),
            at(7, "env: expected NAME=VALUE, got \"no-equals\""),
            at(10, "meta key OWNER is given more than once"),
        ])
    }

    /// 350 good and 150 bad `env` lines, schedule and action last (5.4 KB): finding the line of each bad
    /// one re-validated the job once per earlier `env` line, 2.2 s in a release build and 29 s in a debug
    /// one. Now a bisection: the same diagnostics in 0.11 s (release), about 1 s (debug).
    @Test func manyErrorsInRepeatedKeysAreLocatedQuickly() {
        let good = String(repeating: "env = A=1\n", count: 350)
        let bad = (0..<150).map { "env = bad\($0)\n" }.joined()
        let start = ContinuousClock.now
        let found = problems("[job \"a\"]\n" + good + bad + "every = 5s\ncommand = true\n")
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(found == (0..<150).map { at(352 + $0, "env: expected NAME=VALUE, got \"bad\($0)\"") })
    }

    @Test func jobSpecErrorsPointAtTheirKeys() {
        let text = """
            [job "a"]
            command = true
            every = 5ms

            [job "b"]
            in = 5s
            command = true
            count = 3

            [job "c"]
            command = true
            at = tomorrow

            [job "d"]
            in = 1s
            every = 1s
            command = true

            [job "e"]
            every = 1s
            command = true
            argv = true

            [job "f"]
            in = 1s
            start = 1s
            argv = 'unterminated
            """
        #expect(problems(text) == [
            at(3, "every: interval must be at least 10ms"),
            at(8, "count applies only to repeating schedules (one-shots run once)"),
            at(12, "at: invalid time \"tomorrow\": expected a digit at position 1 (expected RFC 3339 such as 2026-11-29T16:00:00Z)"),
            at(16, "give only one of every, in, at, cron and calendar (got in, every)"),
            at(21, "give only one action: command=, argv=, webhook= or words after --"),
            at(26, "start applies only to every= jobs (use in= for a one-shot delay)"),
            at(27, "argv: unterminated single quote (opened at byte 1)"),
        ])
    }

    @Test func missingScheduleAndActionPointAtTheHeader() {
        #expect(problems("\n[job \"empty\"]\n\n[job \"noaction\"]\nevery = 1s\n") == [
            at(2, "a schedule is required: every=DUR, in=DUR, at=TIME, cron=EXPR, calendar=SPEC, or after=JOB"),
            at(2, "an action is required: command=STRING, argv=WORDS or webhook=URL"),
            at(4, "an action is required: command=STRING, argv=WORDS or webhook=URL"),
        ])
    }

    @Test func everyProblemInAJobIsReported() {
        let text = """
            [job "a"]
            every = often
            count = -1
            command =
            timeout = 0s
            overlap = sometimes
            cwd = relative/dir
            leeway = a bit
            kill_grace = x
            """
        #expect(problems(text) == [
            at(2, "every: invalid duration \"often\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(3, "count: expected a whole number of runs ≥ 1, got \"-1\""),
            at(4, "command is empty"),
            at(5, "timeout must be greater than 0"),
            at(6, "overlap: expected skip, queue, allow or replace, got \"sometimes\""),
            at(7, "cwd must be an absolute path, got \"relative/dir\""),
            at(8, "leeway: invalid duration \"a bit\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(9, "kill_grace: invalid duration \"x\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
        ])
    }

    @Test func duplicateJobNamesInOneFile() {
        let text = """
            [job "a"]
            every = 1s
            command = true
            [job "a"]
            every = 2s
            command = true
            """
        #expect(problems(text) == [at(4, "job \"a\" is already declared at \(mainPath):1")])
    }

    @Test func severalErrorsAreReportedTogetherInLineOrder() {
        let text = """
            [daemon]
            max_running = many
            [job "ok"]
            every = 1s
            command = true
            [job "bad"]
            every = 1 s x
            commnd = true
            [nonsense]
            foo = bar
            """
        #expect(problems(text) == [
            at(2, "max_running: expected a whole number ≥ 1, got \"many\""),
            at(7, "every: invalid duration \"1 s x\": expected a number (examples: 250ms, 5s, 1m30s, 2h, 1d, 5min)"),
            at(8, "unknown key \"commnd\" (did you mean command?)"),
            at(9, "unknown section [nonsense] (expected [daemon], [cluster], [pool \"NAME\"] or [job \"NAME\"])"),
        ])
    }

    @Test func specsRoundTripThroughConfigText() throws {
        let text = """
            [job "a"]
            every = 1m30s
            start = 0s
            count = 4
            leeway = 250ms
            argv = /bin/echo "it's" 'a "b"' plain
            timeout = 1h
            kill_grace = 3s
            overlap = allow
            env = X=1 2
            meta = m=n
            cwd = /var/tmp
            """
        let config = try #require(configuration(text))
        let original = config.jobs[0].spec
        let rewritten = "[job \"a\"]\n" + original.options.map { "\($0.key) = \($0.value)" }.joined(separator: "\n") + "\n"
        let again = try #require(configuration(rewritten))
        #expect(again.jobs[0].spec == original)
        #expect(original.action == .argv(["/bin/echo", "it's", "a \"b\"", "plain"]))
    }

    @Test func configErrorsDescribeAndConvert() {
        let errors = ConfigErrors([
            Diagnostic(file: "/a.conf", line: 3, message: "bad"),
            Diagnostic(file: "/b.conf", line: 0, message: "cannot read: Permission denied"),
        ])
        #expect(errors.description == "/a.conf:3: bad\n/b.conf: cannot read: Permission denied")
        #expect(errors.timerdError.code == .invalidConfig)
        #expect(errors.timerdError.message == "/a.conf:3: bad (and 1 more)")
    }
}
