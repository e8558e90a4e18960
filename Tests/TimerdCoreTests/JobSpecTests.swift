import Testing
@testable import TimerdCore

@Suite("JobSpec")
struct JobSpecTests {
    static let job = name("job")

    static func spec(_ options: [KeyValue], argv: [String]? = nil) throws(TimerdError) -> JobSpec {
        try JobSpec(name: job, options: options, argv: argv)
    }

    // MARK: - Accepted keys

    @Test("minimal specs get the documented defaults")
    func defaults() throws {
        let spec = try Self.spec(opts(("every", "5s"), ("command", "echo hi")))
        #expect(spec.name == Self.job)
        #expect(spec.schedule == .every(interval: .seconds(5), start: nil))
        #expect(spec.action == .shell("echo hi"))
        #expect(spec.count == nil)
        #expect(spec.leeway == .zero)
        #expect(spec.timeout == nil)
        #expect(spec.killGrace == Limits.defaultKillGrace)
        #expect(spec.overlap == .skip)
        #expect(spec.killMode == nil)
        #expect(spec.env.isEmpty)
        #expect(spec.meta.isEmpty)
        #expect(spec.cwd == nil)
        #expect(spec.options == opts(("every", "5s"), ("command", "echo hi")))
        #expect(spec == JobSpec(name: Self.job, schedule: .every(interval: .seconds(5), start: nil), action: .shell("echo hi")))
    }

    @Test("every key is read")
    func everyKey() throws {
        let spec = try Self.spec(opts(
            ("every", "1m30s"), ("start", "10s"), ("count", "3"), ("leeway", "250ms"), ("argv", "ls -l '/tmp dir'"),
            ("timeout", "2m"), ("kill_grace", "1s"), ("kill_mode", "mixed"), ("overlap", "replace"), ("env", "A=1"),
            ("env", "B=x=y"), ("meta", "owner=ops"), ("meta", "1st=yes"), ("cwd", "/var/tmp"), ("user", "backup"),
            ("group", "adm"), ("owner", "pid:42"), ("tag", "t1"), ("tag", "t2"), ("modes", "common, maintenance")))
        #expect(spec.user == "backup" && spec.group == "adm")
        #expect(spec.schedule == .every(interval: .seconds(90), start: .seconds(10)))
        #expect(spec.owner == .process(42))
        #expect(spec.tags == ["t1", "t2"])
        #expect(spec.modes == ["common", "maintenance"])
        #expect(spec.count == 3)
        #expect(spec.leeway == .milliseconds(250))
        #expect(spec.action == .argv(["ls", "-l", "/tmp dir"]))
        #expect(spec.timeout == .seconds(120))
        #expect(spec.killGrace == .seconds(1))
        #expect(spec.killMode == .mixed)
        #expect(spec.overlap == .replace)
        #expect(spec.env == [KeyValue("A", "1"), KeyValue("B", "x=y")])
        #expect(spec.meta == [KeyValue("owner", "ops"), KeyValue("1st", "yes")])
        #expect(spec.cwd == "/var/tmp")
        #expect(spec.options == opts(
            ("every", "1m30s"), ("start", "10s"), ("count", "3"), ("leeway", "250ms"), ("argv", "ls -l '/tmp dir'"),
            ("timeout", "2m"), ("kill_grace", "1s"), ("kill_mode", "mixed"), ("overlap", "replace"), ("env", "A=1"),
            ("env", "B=x=y"), ("meta", "owner=ops"), ("meta", "1st=yes"), ("cwd", "/var/tmp"), ("user", "backup"),
            ("group", "adm"), ("owner", "pid:42"), ("tag", "t1"), ("tag", "t2"), ("modes", "common,maintenance")))
        // Every key in `keys` except the alternatives of schedule and action (and the webhook action's own
        // keys, covered in WebhookTests; the calendar keys, covered below) appears above.
        let used = Set(spec.options.map(\.key))
        #expect(Set(JobSpec.keys).subtracting(used).subtracting(Webhook.keys)
            == Set(["in", "at", "command", "webhook", "on_failure", "on_recovery", "cron", "calendar", "timezone", "dst_gap",
                "dst_repeat", "jitter", "fixed_jitter", "misfire", "misfire_grace", "history_limit", "cluster"]
                + ResourceSettings.keys + ["success_exit_codes", "fail_on_stderr", "pause_after_failures", "pool", "log_file",
                                           "log_max_size", "log_keep", "after", "after_result", "run_on"]))  // covered in ResourceSettingsTests, below
    }

    @Test("success_exit_codes and fail_on_stderr say what counts as failure, only for commands")
    func whatCountsAsFailure() throws {
        let spec = try Self.spec(opts(("every", "1m"), ("success_exit_codes", "10, 0-2,4,3"), ("fail_on_stderr", "yes"), ("command", "x")))
        #expect(spec.successExitCodes == [0, 1, 2, 3, 4, 10] && spec.failOnStderr == true)
        #expect(spec.options.contains(KeyValue("success_exit_codes", "0-4,10")) && spec.options.contains(KeyValue("fail_on_stderr", "yes")))
        #expect(try Self.spec(spec.options) == spec)
        #expect(ExitCodes.format([0, 1]) == "0,1" && ExitCodes.format([0, 2, 3, 4, 7, 8]) == "0,2-4,7,8")
        for bad in ["", "256", "1-", "3-1", "a", "0,,1", "-1"] {
            expectError(.badArgument, key: "success_exit_codes", mentions: ["exit statuses from 0 to 255", "\"\(bad)\""]) {
                try Self.spec(opts(("every", "1m"), ("success_exit_codes", bad), ("command", "x")))
            }
        }
        #expect(try Self.spec(opts(("every", "1m"), ("pause_after_failures", "3"), ("webhook", "http://127.0.0.1/"))).pauseAfterFailures == 3)
        let logged = try Self.spec(opts(("every", "1m"), ("log_file", "/var/log/b.log"), ("log_max_size", "512K"), ("log_keep", "0"), ("command", "x")))
        #expect(logged.logFile == LogFileSpec(path: "/var/log/b.log", maxSize: 512 << 10, keep: 0))
        #expect(try Self.spec(logged.options) == logged)
        expectError(.badArgument, key: "log_file", mentions: ["absolute path"]) {
            try Self.spec(opts(("every", "1m"), ("log_file", "b.log"), ("command", "x")))
        }
        #expect(try Self.spec(opts(("after", "up"), ("every", "1h"), ("cluster", "yes"), ("command", "x"))).cluster == true)
        #expect(try Self.spec(opts(("after", "up"), ("cluster", "yes"), ("command", "x"))).cluster == true)
        expectError(.badArgument, key: "log_keep", mentions: ["only with log_file"]) {
            try Self.spec(opts(("every", "1m"), ("log_keep", "3"), ("command", "x")))
        }
        for bad in ["0", "1001", "x"] {
            expectError(.badArgument, key: "pause_after_failures", mentions: ["from 1 to 1000"]) {
                try Self.spec(opts(("every", "1m"), ("pause_after_failures", bad), ("command", "x")))
            }
        }
        expectError(.badArgument, key: "pause_after_failures", mentions: ["only to repeating schedules"]) {
            try Self.spec(opts(("in", "1m"), ("pause_after_failures", "2"), ("command", "x")))
        }
        for key in ["success_exit_codes", "fail_on_stderr"] {
            expectError(.badArgument, key: key, mentions: ["applies only to commands"]) {
                try Self.spec(opts(("every", "1m"), (key, Self.sampleValue[key]!), ("webhook", "http://127.0.0.1/")))
            }
        }
    }

    @Test("retries and retry_backoff: within one run for webhooks, a run each for commands")
    func commandRetries() throws {
        let spec = try Self.spec(opts(("every", "1m"), ("retries", "3"), ("retry_backoff", "30s"), ("command", "x")))
        #expect(spec.commandRetries == RetryPolicy(retries: 3, backoff: .seconds(30)))
        #expect(spec.options.contains(KeyValue("retries", "3")) && spec.options.contains(KeyValue("retry_backoff", "30s")))
        #expect(try Self.spec(spec.options) == spec)
        #expect(try Self.spec(opts(("every", "1m"), ("retries", "2"), ("command", "x"))).commandRetries?.backoff == Webhook.defaultBackoff)
        let hook = try Self.spec(opts(("every", "1m"), ("retries", "3"), ("webhook", "http://127.0.0.1/")))
        #expect(hook.commandRetries == nil)
        expectError(.badArgument, key: "retry_backoff", mentions: ["only with retries=N"]) {
            try Self.spec(opts(("every", "1m"), ("retry_backoff", "1s"), ("command", "x")))
        }
        expectError(.badArgument, key: "retries", mentions: ["from 0 to 10"]) {
            try Self.spec(opts(("every", "1m"), ("retries", "11"), ("command", "x")))
        }
        #expect(RetryPolicy.ceiling(.seconds(1), retry: 1) == .seconds(1) && RetryPolicy.ceiling(.seconds(1), retry: 4) == .seconds(8))
        #expect(RetryPolicy.ceiling(.seconds(200), retry: 3) == Webhook.maximumBackoff)
    }

    @Test("kill_mode takes systemd's three modes, only for commands")
    func killMode() throws {
        for mode in KillMode.allCases {
            let spec = try Self.spec(opts(("every", "1m"), ("kill_mode", mode.rawValue), ("command", "x")))
            #expect(spec.killMode == mode)
            #expect(spec.options.contains(KeyValue("kill_mode", mode.rawValue)))
        }
        expectError(.badArgument, key: "kill_mode", mentions: ["expected control-group, mixed or process", "\"group\""]) {
            try Self.spec(opts(("every", "1m"), ("kill_mode", "group"), ("command", "x")))
        }
        expectError(.badArgument, key: "kill_mode", mentions: ["applies only to commands"]) {
            try Self.spec(opts(("every", "1m"), ("kill_mode", "process"), ("webhook", "http://127.0.0.1:9/")))
        }
    }

    @Test("user and group take account names, never numbers, and only for commands")
    func userAndGroup() throws {
        let spec = try Self.spec(opts(("every", "1m"), ("user", "www-data"), ("group", "svc$"), ("command", "x")))
        #expect(spec.user == "www-data" && spec.group == "svc$")
        #expect(try Self.spec(spec.options) == spec)
        expectError(.badArgument, key: "user", mentions: ["a name, not a number"]) {
            try Self.spec(opts(("every", "1m"), ("user", "0"), ("command", "x")))
        }
        for bad in ["", "-rf", "a b", "r\u{f6}ot", String(repeating: "a", count: 33), "a/b"] {
            expectError(.badArgument, key: "group", mentions: ["invalid name"]) {
                try Self.spec(opts(("every", "1m"), ("group", bad), ("command", "x")))
            }
        }
        expectError(.badArgument, key: "user", mentions: ["only to commands"]) {
            try Self.spec(opts(("every", "1m"), ("user", "nobody"), ("webhook", "http://127.0.0.1:9/")))
        }
        #expect(JobSpec.publicKeys.isSubset(of: Set(JobSpec.keys)))
        #expect(JobSpec.publicKeys.isDisjoint(with: ["command", "argv", "webhook", "env", "meta", "cwd", "body", "header", "on_failure"]))
    }

    @Test("misfire and history keys round-trip through options, with their limits")
    func stateKeys() throws {
        let spec = try Self.spec(opts(("every", "1m"), ("misfire", "all"), ("misfire_grace", "10s"), ("history_limit", "0"), ("command", "x")))
        #expect(spec.misfire == .all && spec.misfireGrace == .seconds(10) && spec.historyLimit == 0)
        #expect(try Self.spec(spec.options) == spec)
        let plain = try Self.spec(opts(("every", "1m"), ("command", "x")))
        #expect(plain.misfire == .skip && plain.misfireGrace == .seconds(60) && plain.historyLimit == 100)
        #expect(!plain.options.contains { ["misfire", "misfire_grace", "history_limit"].contains($0.key) })
        expectError(.badArgument, key: "misfire", mentions: ["skip, once or all"]) {
            try Self.spec(opts(("every", "1m"), ("misfire", "always"), ("command", "x")))
        }
        expectError(.badArgument, key: "misfire_grace", mentions: ["at least 1s"]) {
            try Self.spec(opts(("every", "1m"), ("misfire_grace", "500ms"), ("command", "x")))
        }
        expectError(.badArgument, key: "history_limit", mentions: ["0 to 10000"]) {
            try Self.spec(opts(("every", "1m"), ("history_limit", "10001"), ("command", "x")))
        }
    }

    @Test("cron and calendar keys round-trip through options")
    func calendarKeys() throws {
        let cron = try Self.spec(opts(("cron", "0 9 * * 1-5"), ("timezone", "Europe/Berlin"), ("dst_gap", "skip"),
                                      ("dst_repeat", "both"), ("jitter", "5m"), ("fixed_jitter", "yes"), ("command", "x")))
        #expect(cron.schedule == .cron(try CronExpression.parse("0 9 * * 1-5")))
        #expect(cron.timezone == "Europe/Berlin")
        #expect(cron.dstGap == .skip && cron.dstRepeat == .both)
        #expect(cron.jitter == .seconds(300) && cron.fixedJitter)
        #expect(try Self.spec(cron.options) == cron)
        // A zone at the end of the spec is the job's zone and is written back only there.
        let calendar = try Self.spec(opts(("calendar", "Sat,Sun 10:00 Europe/Berlin"), ("command", "x")))
        #expect(calendar.timezone == "Europe/Berlin")
        #expect(calendar.options == opts(("calendar", "Sat,Sun 10:00 Europe/Berlin"), ("command", "x")))
        #expect(try Self.spec(calendar.options) == calendar)
        expectError(.badArgument, key: "timezone", mentions: ["contradicts"]) {
            try Self.spec(opts(("calendar", "daily Europe/Berlin"), ("timezone", "UTC"), ("command", "x")))
        }
        for key in ["timezone", "dst_gap", "dst_repeat"] {
            expectError(.badArgument, key: key, mentions: ["applies only to cron= and calendar= jobs"]) {
                try Self.spec(opts(("every", "1s"), (key, Self.sampleValue[key]!), ("command", "x")))
            }
        }
        expectError(.badArgument, key: "timezone", mentions: ["invalid time zone name"]) {
            try Self.spec(opts(("cron", "@daily"), ("timezone", "../../etc/passwd"), ("command", "x")))
        }
        expectError(.badArgument, key: "dst_gap", mentions: ["shift or skip"]) {
            try Self.spec(opts(("cron", "@daily"), ("dst_gap", "later"), ("command", "x")))
        }
        expectError(.badArgument, key: "fixed_jitter", mentions: ["only with jitter"]) {
            try Self.spec(opts(("cron", "@daily"), ("fixed_jitter", "yes"), ("command", "x")))
        }
        expectError(.badArgument, key: "count", mentions: ["only to repeating"]) {
            try Self.spec(opts(("cron", "@reboot"), ("count", "2"), ("command", "x")))
        }
        #expect(try Self.spec(opts(("calendar", "hourly"), ("count", "2"), ("command", "x"))).count == 2)
    }

    @Test("schedules", arguments: [
        (opts(("every", "10ms")), Schedule.every(interval: .milliseconds(10), start: nil)),
        (opts(("every", "1h"), ("start", "0s")), .every(interval: .seconds(3_600), start: .zero)),
        (opts(("start", "5s"), ("every", "1h")), .every(interval: .seconds(3_600), start: .seconds(5))),
        (opts(("every", "36600d")), .every(interval: DurationText.maximum, start: nil)),
        (opts(("in", "30s")), .after(delay: .seconds(30))),
        (opts(("in", "0s")), .after(delay: .zero)),
        (opts(("in", "0")), .after(delay: .zero)),
        (opts(("at", "2026-11-29T17:00:00+01:00")), .at(WallTime(seconds: 1_795_968_000))),
        (opts(("at", "1969-12-31 23:59:59z")), .at(WallTime(seconds: -1))),
    ])
    func schedules(options: [KeyValue], schedule: Schedule) throws {
        #expect(try Self.spec(options + opts(("command", "true"))).schedule == schedule)
    }

    @Test("overlap values", arguments: OverlapPolicy.allCases)
    func overlapValues(policy: OverlapPolicy) throws {
        let spec = try Self.spec(opts(("in", "1s"), ("command", "true"), ("overlap", policy.rawValue)))
        #expect(spec.overlap == policy)
        #expect(spec.options.contains(KeyValue("overlap", policy.rawValue)) == (policy != .skip))
    }

    @Test("overlap raw values")
    func overlapRawValues() {
        #expect(OverlapPolicy.allCases.map(\.rawValue) == ["skip", "queue", "allow", "replace"])
    }

    @Test("actions", arguments: [
        (opts(("command", "echo 'a b' | wc -c")), nil, Action.shell("echo 'a b' | wc -c")),
        (opts(("command", "  ls")), nil, .shell("  ls")),
        (opts(("command", "x\ny")), nil, .shell("x\ny")),
        (opts(("argv", "/bin/echo")), nil, .argv(["/bin/echo"])),
        (opts(("argv", "  a   b\tc  ")), nil, .argv(["a", "b", "c"])),
        (opts(("argv", #"echo "a b" 'c d' e\ f '' """#)), nil, .argv(["echo", "a b", "c d", "e f", "", ""])),
        (opts(("argv", #"a"b"c'd'"#)), nil, .argv(["abcd"])),
        (opts(("argv", #""\n\t\"\\\x""#)), nil, .argv(["\n\t\"\\x"])),
        (opts(("argv", #"'\n'"#)), nil, .argv([#"\n"#])),
        (opts(("argv", "héllo wörld")), nil, .argv(["héllo", "wörld"])),
        ([], ["/usr/bin/env", "a b", "", "x\ny"], .argv(["/usr/bin/env", "a b", "", "x\ny"])),
        ([], [""], .argv([""])),
    ] as [([KeyValue], [String]?, Action)])
    func actions(options: [KeyValue], argv: [String]?, action: Action) throws {
        #expect(try Self.spec(opts(("in", "1s")) + options, argv: argv).action == action)
    }

    @Test("Action.summary")
    func actionSummary() {
        #expect(Action.shell("echo hi | wc").summary == "echo hi | wc")
        #expect(Action.argv(["ls", "-l", "/tmp"]).summary == "ls -l /tmp")
    }

    @Test("count", arguments: [("1", 1), ("3", 3), ("007", 7), ("1000000", 1_000_000)])
    func count(text: String, value: Int) throws {
        #expect(try Self.spec(opts(("every", "1s"), ("count", text), ("command", "true"))).count == value)
    }

    @Test("env and meta keep order; env names may repeat; meta names may start with a digit")
    func envAndMeta() throws {
        let spec = try Self.spec(opts(
            ("in", "1s"), ("meta", "b=2"), ("env", "Z=1"), ("command", "true"), ("env", "A="), ("meta", "a_1=x"),
            ("env", "Z=2"), ("meta", "9=nine"), ("env", "_under=ok"), ("env", "timerd_lower=ok"), ("env", "X=a\tb c=d")))
        #expect(spec.env == [KeyValue("Z", "1"), KeyValue("A", ""), KeyValue("Z", "2"), KeyValue("_under", "ok"),
                             KeyValue("timerd_lower", "ok"), KeyValue("X", "a\tb c=d")])
        #expect(spec.meta == [KeyValue("b", "2"), KeyValue("a_1", "x"), KeyValue("9", "nine")])
    }

    // MARK: - options

    @Test("options writes keys in the documented order and omits defaults")
    func optionsOrder() throws {
        let spec = try Self.spec(opts(
            ("cwd", "/"), ("meta", "m=1"), ("env", "E=1"), ("overlap", "queue"), ("kill_grace", "5s"), ("timeout", "1s"),
            ("leeway", "0s"), ("count", "2"), ("start", "1s"), ("every", "2s"), ("command", "true")))
        let keys = spec.options.map(\.key)
        // kill_grace=5s and leeway=0s are the defaults, so they are not written.
        #expect(keys == ["every", "start", "count", "command", "timeout", "overlap", "env", "meta", "cwd"])
        let order = keys.map { JobSpec.keys.firstIndex(of: $0)! }
        #expect(order == order.sorted())
    }

    @Test("options writes canonical values")
    func canonicalValues() throws {
        let spec = try Self.spec(opts(
            ("at", "2026-11-29t17:00:00.5+01:00"), ("leeway", "1.5s"), ("timeout", "90"), ("kill_grace", "0.25 min"),
            ("argv", #"a "b c""#)))
        #expect(spec.options == opts(
            ("at", "2026-11-29T16:00:00.500000Z"), ("leeway", "1s500ms"), ("argv", "a 'b c'"), ("timeout", "1m30s"),
            ("kill_grace", "15s")))
    }

    /// Random specs built with the memberwise initializer survive `options` and back.
    @Test("JobSpec(name:options: spec.options) == spec for random specs", arguments: [31, 32, 33, 34] as [UInt64])
    func roundTripRandom(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<1_000 {
            let spec = RandomSpec.make(using: &rng)
            let options = spec.options
            let reparsed = caught { try JobSpec(name: spec.name, options: options) }
            guard reparsed == nil else {
                Issue.record("\(options) failed: \(reparsed!.message)")
                continue
            }
            let back = try JobSpec(name: spec.name, options: options)
            #expect(back == spec, "\(options)")
            #expect(back.options == options)
        }
    }

    static let trickyWords: [String] = [
        "", " ", "a b", "'", "\"", "\\", "\\\\", "\\n", "it's", "say \"hi\"", "back\\slash", "tab\there", "new\nline",
        "both ' and \"", "'\"\\\t\n", "ünïcödé", "日本語 テキスト", "emoji 😀", "\r", "\u{7F}", "\u{1}", "$HOME", "*", "a=b",
        "--", "-", "'leading", "trailing'", "  spaces  ", "\t", "\n", "''", "\"\"", "#comment",
    ]

    @Test("argv words that need quoting survive the round trip", arguments: trickyWords)
    func trickyArgvWord(word: String) throws {
        for argv in [[word], ["prog", word], [word, word, "x"]] {
            let spec = try Self.spec(opts(("every", "1s")), argv: argv)
            #expect(spec.action == .argv(argv))
            let back = try JobSpec(name: spec.name, options: spec.options)
            #expect(back == spec, "\(spec.options)")
        }
    }

    @Test("random argv words survive the round trip", arguments: [41, 42] as [UInt64])
    func quoteSplitRandom(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        for _ in 0..<3_000 {
            let words = (0..<Int.random(in: 1...5, using: &rng)).map { _ in RandomSpec.word(using: &rng) }
            let spec = JobSpec(name: name("q"), schedule: .after(delay: .zero), action: .argv(words))
            #expect(try JobSpec(name: spec.name, options: spec.options) == spec, "\(spec.options)")
        }
    }

    @Test("argv is written with the protocol's quoting", arguments: [
        (["ls"], "ls"), (["/usr/bin/env", "a b"], "/usr/bin/env 'a b'"), ([""], "''"), (["it's"], #""it's""#),
        (["x\ny"], #""x\ny""#), (["say \"hi\""], #"'say "hi"'"#), (["a\\b"], #"'a\b'"#), (["héllo"], "héllo"),
    ] as [([String], String)])
    func argvQuoting(argv: [String], written: String) throws {
        let spec = try Self.spec(opts(("in", "1s")), argv: argv)
        #expect(spec.options.last == KeyValue("argv", written))
    }

    /// timerd keeps `at=` times to the microsecond (what it shows and writes back), so the documented
    /// `JobSpec(name:options: spec.options) == spec` holds for any input precision.
    @Test("an at= time with sub-microsecond digits survives the round trip")
    func atNanosecondsRoundTrip() throws {
        let spec = try Self.spec(opts(("at", "2026-11-29T16:00:00.123456789Z"), ("command", "true")))
        #expect(spec.schedule == .at(WallTime(nanosecondsSinceEpoch: 1_795_968_000 * nsPerSecond + 123_456_000)))
        #expect(try JobSpec(name: spec.name, options: spec.options) == spec, "\(spec.options)")
    }

    // MARK: - Errors

    static let errors: [(options: [KeyValue], argv: [String]?, code: TimerdError.Code, key: String?, mentions: String)] = [
        // Schedule.
        ([], nil, .missingArgument, nil, "schedule is required"),
        (opts(("command", "true")), nil, .missingArgument, nil, "schedule is required"),
        (opts(("every", "1s"), ("in", "1s"), ("command", "x")), nil, .badArgument, "in", "only one of every, in, at, cron and calendar"),
        (opts(("in", "1s"), ("every", "1s"), ("command", "x")), nil, .badArgument, "every", "got in, every"),
        (opts(("at", "2026-01-01T00:00:00Z"), ("in", "1s"), ("command", "x")), nil, .badArgument, "in", "only one"),
        (opts(("every", "1s"), ("at", "2026-01-01T00:00:00Z"), ("command", "x")), nil, .badArgument, "at", "only one"),
        (opts(("every", "9ms"), ("command", "x")), nil, .badArgument, "every", "at least 10ms"),
        (opts(("every", "9.999ms"), ("command", "x")), nil, .badArgument, "every", "at least 10ms"),
        (opts(("every", "0"), ("command", "x")), nil, .badArgument, "every", "at least 10ms"),
        (opts(("every", "5x"), ("command", "x")), nil, .badArgument, "every", "invalid duration \"5x\""),
        (opts(("every", ""), ("command", "x")), nil, .badArgument, "every", "every: invalid duration"),
        (opts(("every", "36601d"), ("command", "x")), nil, .badArgument, "every", "100 years"),
        (opts(("in", "-1s"), ("command", "x")), nil, .badArgument, "in", "in: invalid duration \"-1s\""),
        (opts(("at", "2026-01-01T00:00:00"), ("command", "x")), nil, .badArgument, "at", "at: invalid time"),
        (opts(("at", "tomorrow"), ("command", "x")), nil, .badArgument, "at", "\"tomorrow\""),
        (opts(("every", "1s"), ("start", "soon"), ("command", "x")), nil, .badArgument, "start", "start: invalid duration"),
        (opts(("in", "1s"), ("start", "1s"), ("command", "x")), nil, .badArgument, "start", "only to every="),
        (opts(("at", "2026-01-01T00:00:00Z"), ("start", "1s"), ("command", "x")), nil, .badArgument, "start", "only to every="),
        (opts(("start", "1s"), ("command", "x")), nil, .badArgument, "start", "only to every="),
        // Count.
        (opts(("in", "1s"), ("count", "3"), ("command", "x")), nil, .badArgument, "count", "only to repeating schedules"),
        (opts(("at", "2026-01-01T00:00:00Z"), ("count", "1"), ("command", "x")), nil, .badArgument, "count", "only to repeating schedules"),
        // Action.
        (opts(("every", "1s")), nil, .missingArgument, nil, "action is required"),
        (opts(("every", "1s"), ("command", "")), nil, .badArgument, "command", "command is empty"),
        (opts(("every", "1s"), ("command", " \t ")), nil, .badArgument, "command", "command is empty"),
        (opts(("every", "1s"), ("argv", "")), nil, .badArgument, "argv", "argv is empty"),
        (opts(("every", "1s"), ("argv", " \t ")), nil, .badArgument, "argv", "argv is empty"),
        (opts(("every", "1s"), ("argv", "'open")), nil, .badArgument, "argv", "argv: unterminated"),
        (opts(("every", "1s"), ("argv", "\"open")), nil, .badArgument, "argv", "argv: unterminated"),
        (opts(("every", "1s"), ("argv", "\"open\\")), nil, .badArgument, "argv", "argv: unterminated"),
        (opts(("every", "1s"), ("argv", "a\\")), nil, .badArgument, "argv", "argv: trailing backslash"),
        (opts(("every", "1s")), [], .badArgument, "argv", "nothing after --"),
        (opts(("every", "1s")), ["a\u{0}b"], .badArgument, "argv", "NUL"),
        (opts(("every", "1s")), ["ok", "\u{0}"], .badArgument, "argv", "NUL"),
        (opts(("every", "1s"), ("command", "x"), ("argv", "y")), nil, .badArgument, "command", "only one action"),
        (opts(("every", "1s"), ("command", "x")), ["y"], .badArgument, "command", "only one action"),
        (opts(("every", "1s"), ("argv", "x")), ["y"], .badArgument, "argv", "only one action"),
        // Other keys.
        (opts(("every", "1s"), ("command", "x"), ("overlap", "never")), nil, .badArgument, "overlap", "\"never\""),
        (opts(("every", "1s"), ("command", "x"), ("overlap", "SKIP")), nil, .badArgument, "overlap", "skip, queue, allow or replace"),
        (opts(("every", "1s"), ("command", "x"), ("overlap", "")), nil, .badArgument, "overlap", "got \"\""),
        (opts(("every", "1s"), ("command", "x"), ("cwd", "tmp")), nil, .badArgument, "cwd", "absolute path, got \"tmp\""),
        (opts(("every", "1s"), ("command", "x"), ("cwd", "")), nil, .badArgument, "cwd", "absolute path"),
        (opts(("every", "1s"), ("command", "x"), ("cwd", "~/x")), nil, .badArgument, "cwd", "absolute path"),
        (opts(("every", "1s"), ("command", "x"), ("cwd", "./x")), nil, .badArgument, "cwd", "absolute path"),
        (opts(("every", "1s"), ("command", "x"), ("timeout", "0s")), nil, .badArgument, "timeout", "greater than 0"),
        (opts(("every", "1s"), ("command", "x"), ("timeout", "0")), nil, .badArgument, "timeout", "greater than 0"),
        (opts(("every", "1s"), ("command", "x"), ("timeout", "forever")), nil, .badArgument, "timeout", "timeout: invalid duration"),
        (opts(("every", "1s"), ("command", "x"), ("leeway", "1q")), nil, .badArgument, "leeway", "leeway: invalid duration"),
        (opts(("every", "1s"), ("command", "x"), ("kill_grace", "-1s")), nil, .badArgument, "kill_grace", "kill_grace: invalid"),
        // Unknown keys.
        (opts(("every", "1s"), ("command", "x"), ("bogus", "1")), nil, .badArgument, "bogus", "unknown key \"bogus\""),
        (opts(("", "1"), ("every", "1s"), ("command", "x")), nil, .badArgument, "", "unknown key \"\""),
        (opts(("name", "x"), ("every", "1s"), ("command", "x")), nil, .badArgument, "name", "unknown key \"name\""),
        (opts(("interval", "1s"), ("command", "x")), nil, .badArgument, "interval", "unknown key"),
        // Env.
        (opts(("in", "1s"), ("command", "x"), ("env", "NOEQUALS")), nil, .badArgument, "env", "expected NAME=VALUE, got \"NOEQUALS\""),
        (opts(("in", "1s"), ("command", "x"), ("env", "=v")), nil, .badArgument, "env", "invalid name \"\""),
        (opts(("in", "1s"), ("command", "x"), ("env", "1A=v")), nil, .badArgument, "env", "invalid name \"1A\""),
        (opts(("in", "1s"), ("command", "x"), ("env", "9=v")), nil, .badArgument, "env", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("env", "A-B=v")), nil, .badArgument, "env", "invalid name \"A-B\""),
        (opts(("in", "1s"), ("command", "x"), ("env", "A B=v")), nil, .badArgument, "env", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("env", "A.B=v")), nil, .badArgument, "env", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("env", "ÄB=v")), nil, .badArgument, "env", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("env", " A=v")), nil, .badArgument, "env", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("env", "TIMERD_JOB=x")), nil, .badArgument, "env", "TIMERD_JOB is reserved"),
        (opts(("in", "1s"), ("command", "x"), ("env", "TIMERD_=x")), nil, .badArgument, "env", "reserved"),
        (opts(("in", "1s"), ("command", "x"), ("env", "TIMERD_META_X=x")), nil, .badArgument, "env", "reserved"),
        (opts(("in", "1s"), ("command", "x"), ("env", "A=a\u{0}b")), nil, .badArgument, "env", "NUL"),
        (opts(("in", "1s"), ("command", "x"), ("env", "A\u{0}=v")), nil, .badArgument, "env", "invalid name"),
        // Meta.
        (opts(("in", "1s"), ("command", "x"), ("meta", "novalue")), nil, .badArgument, "meta", "expected NAME=VALUE"),
        (opts(("in", "1s"), ("command", "x"), ("meta", "a-b=v")), nil, .badArgument, "meta", "meta: invalid name \"a-b\""),
        (opts(("in", "1s"), ("command", "x"), ("meta", "=v")), nil, .badArgument, "meta", "invalid name"),
        (opts(("in", "1s"), ("command", "x"), ("meta", "k=1"), ("meta", "k=2")), nil, .badArgument, "meta", "k is given more than once"),
        (opts(("in", "1s"), ("command", "x"), ("meta", "Owner=1"), ("meta", "OWNER=2")), nil, .badArgument, "meta", "OWNER is given more than once"),
        (opts(("in", "1s"), ("command", "x"), ("meta", "a=1"), ("meta", "b=1"), ("meta", "A=2")), nil, .badArgument, "meta", "more than once"),
        (opts(("in", "1s"), ("command", "x"), ("meta", "k=\u{0}")), nil, .badArgument, "meta", "NUL"),
    ]

    @Test("validation errors carry the code and the offending key", arguments: errors)
    func validation(options: [KeyValue], argv: [String]?, code: TimerdError.Code, key: String?, mentions: String) {
        expectError(code, key: .some(key), mentions: [mentions]) { try Self.spec(options, argv: argv) }
    }

    static let badCounts = ["0", "00", "+3", "-1", " 3", "3 ", "3.0", "", "1e3", "0x10", "３", "99999999999999999999", "three"]

    @Test("count must be digits and at least 1", arguments: badCounts)
    func badCount(text: String) {
        expectError(.badArgument, key: "count", mentions: ["count:", "\"\(text)\""]) {
            try Self.spec(opts(("every", "1s"), ("count", text), ("command", "x")))
        }
    }

    static let singleKeys = JobSpec.keys.filter { !JobSpec.repeatableKeys.contains($0) }

    /// A valid value for each key, used where the key must be accepted apart from being repeated.
    static let sampleValue: [String: String] = [
        "every": "1s", "start": "1s", "in": "1s", "at": "2026-01-01T00:00:00Z", "count": "2", "leeway": "1ms",
        "command": "true", "argv": "true", "timeout": "1s", "kill_grace": "1s", "kill_mode": "mixed", "overlap": "queue", "cwd": "/", "user": "nobody", "group": "nogroup",
        "owner": "pid:42", "modes": "common", "webhook": "http://127.0.0.1/", "method": "PUT", "body": "x",
        "content_type": "text/plain", "expect": "2xx", "retries": "1", "retry_backoff": "1s", "redirects": "1",
        "ca_file": "/etc/ssl/ca.pem", "insecure": "no", "on_failure": "true", "on_recovery": "true",
        "cron": "* * * * *", "calendar": "daily", "timezone": "UTC", "dst_gap": "skip", "dst_repeat": "both",
        "jitter": "1s", "fixed_jitter": "yes", "misfire": "once", "misfire_grace": "5s", "history_limit": "7",
        "cluster": "yes", "memory_max": "1G", "memory_high": "512M", "memory_swap_max": "0", "cpu_quota": "50%",
        "cpu_weight": "50", "io_weight": "50", "tasks_max": "64", "nice": "5", "ionice": "idle", "oom_score_adj": "500",
        "success_exit_codes": "0,3", "fail_on_stderr": "yes", "pause_after_failures": "3", "pool": "heavy",
        "log_file": "/var/log/x.log", "log_max_size": "1M", "log_keep": "2",
        "after": "upstream", "after_result": "any", "run_on": "ssd",
    ].merging(ProcessLimit.Kind.allCases.map { ($0.key, "1") }) { $1 }

    @Test("non-repeatable keys given twice", arguments: singleKeys)
    func repeated(key: String) {
        let value = Self.sampleValue[key]!
        // Same value twice is still an error; so is a different second value.
        for second in [value, value + "0"] {
            expectError(.badArgument, key: key, mentions: ["\(key) is given more than once"]) {
                try Self.spec(opts(("every", "1s"), ("command", "x")).filter { $0.key != key }
                    + opts((key, value), (key, second)))
            }
        }
    }

    /// A 64 KiB ADD line holds thousands of `meta=`/`tag=` options: checking each against all before it
    /// took 1.9 s of daemon CPU for 6,500 meta keys (release build). Now linear.
    @Test("thousands of meta keys, tags and body placeholders are checked in linear time")
    func manyRepeatedKeys() throws {
        let count = 6_500
        let metas = (0..<count).map { KeyValue("meta", "k\($0)=1") }
        let tags = (0..<count).map { KeyValue("tag", "t\($0)") }
        let body = KeyValue("body", (0..<count).map { "{meta.k\($0)}" }.joined())
        let start = ContinuousClock.now
        let spec = try Self.spec(opts(("every", "1s"), ("command", "x")) + metas + tags)
        #expect(spec.meta.count == count && spec.tags.count == count)
        _ = try Self.spec(opts(("every", "1s"), ("webhook", "http://localhost/")) + metas + [body])
        expectError(.badArgument, key: "meta", mentions: ["meta key K0 is given more than once"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x")) + metas + [KeyValue("meta", "K0=2")])
        }
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test("cluster=yes|no is kept in the options; owner= jobs cannot be cluster jobs")
    func clusterKey() throws {
        #expect(try Self.spec(opts(("every", "1s"), ("command", "x"))).cluster == nil)
        let shared = try Self.spec(opts(("every", "1s"), ("command", "x"), ("cluster", "yes")))
        #expect(shared.cluster == true && shared.options.contains(KeyValue("cluster", "yes")))
        #expect(try Self.spec(opts(("every", "1s"), ("command", "x"), ("cluster", "no"))).cluster == false)
        expectError(.badArgument, key: "cluster", mentions: ["expected yes or no"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x"), ("cluster", "maybe")))
        }
        expectError(.badArgument, key: "cluster", mentions: ["owner= jobs"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x"), ("owner", "pid:1"), ("cluster", "yes")))
        }
    }

    @Test("run_on takes a list of tags, trimmed and without repeats, and round-trips as one option")
    func runOn() throws {
        #expect(try Self.spec(opts(("every", "1s"), ("command", "x"))).runOn == [])
        let placed = try Self.spec(opts(("every", "1s"), ("command", "x"), ("run_on", " ssd ,eu-west,\tssd, gpu.1")))
        #expect(placed.runOn == ["ssd", "eu-west", "gpu.1"])
        #expect(placed.options.last == KeyValue("run_on", "ssd,eu-west,gpu.1"))
        #expect(placed.options.filter { $0.key == "run_on" }.count == 1)
        #expect(try Self.spec(placed.options) == placed)
        let shared = try Self.spec(opts(("every", "1s"), ("command", "x"), ("cluster", "yes"), ("run_on", "ssd"), ("tag", "t")))
        #expect(shared.options.suffix(3) == opts(("tag", "t"), ("cluster", "yes"), ("run_on", "ssd")))
        #expect(try Self.spec(shared.options) == shared)
        #expect(JobSpec.publicKeys.contains("run_on"))
        for bad in ["", "a b", "ssd,", ",ssd", "ssd,,gpu", "é", String(repeating: "a", count: 65)] {
            expectError(.badArgument, key: "run_on", mentions: ["run_on: invalid tag", "1 to 64 letters"]) {
                try Self.spec(opts(("every", "1s"), ("command", "x"), ("run_on", bad)))
            }
        }
        expectError(.badArgument, key: "run_on", mentions: ["places shared jobs on the cluster's nodes", "a cluster=no job runs on the node that has it"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x"), ("cluster", "no"), ("run_on", "ssd")))
        }
        expectError(.badArgument, key: "run_on", mentions: ["places shared jobs on the cluster's nodes", "an owner= job"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x"), ("owner", "pid:42"), ("run_on", "ssd")))
        }
    }

    @Test("keys and repeatable keys")
    func keyLists() {
        #expect(JobSpec.keys == [
            "every", "start", "in", "at", "cron", "calendar", "timezone", "dst_gap", "dst_repeat", "jitter",
            "fixed_jitter", "misfire", "misfire_grace", "count", "leeway", "command", "argv", "webhook", "method", "header", "body",
            "content_type", "expect", "retries", "retry_backoff", "redirects", "ca_file", "insecure", "timeout",
            "kill_grace", "kill_mode", "memory_max", "memory_high", "memory_swap_max", "cpu_quota", "cpu_weight", "io_weight",
            "tasks_max", "nice", "ionice", "oom_score_adj", "limit_cpu", "limit_fsize", "limit_data", "limit_stack",
            "limit_core", "limit_rss", "limit_nproc", "limit_nofile", "limit_memlock", "limit_as", "limit_locks",
            "limit_sigpending", "limit_msgqueue", "limit_nice", "limit_rtprio", "limit_rttime", "success_exit_codes",
            "fail_on_stderr", "pause_after_failures", "pool", "log_file", "log_max_size", "log_keep", "after", "after_result",
            "overlap", "env", "meta",
            "cwd", "user", "group", "owner", "tag", "modes", "on_failure", "on_recovery", "history_limit", "cluster", "run_on",
        ])
        #expect(JobSpec.repeatableKeys == ["env", "meta", "tag", "header"])
        #expect(Set(JobSpec.keys).count == JobSpec.keys.count)
    }

    @Test("a NUL byte in any single-valued key is rejected with that key", arguments: singleKeys)
    func nulInValue(key: String) {
        let value = Self.sampleValue[key]! + "\u{0}"
        expectError(.badArgument, key: key, mentions: ["NUL"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x")).filter { $0.key != key } + opts((key, value)))
        }
    }

    @Test("every boundary: 10ms accepted, anything shorter rejected")
    func minimumInterval() throws {
        #expect(Limits.minimumInterval == .milliseconds(10))
        #expect(try Self.spec(opts(("every", "10ms"), ("command", "x"))).schedule == .every(interval: .milliseconds(10), start: nil))
        #expect(try Self.spec(opts(("every", "0.01"), ("command", "x"))).schedule == .every(interval: .milliseconds(10), start: nil))
        expectError(.badArgument, key: "every") { try Self.spec(opts(("every", "9999999ns"), ("command", "x"))) }
        // `in` has no minimum.
        #expect(try Self.spec(opts(("in", "1ns"), ("command", "x"))).schedule == .after(delay: .nanoseconds(1)))
    }

    // MARK: - Typo suggestions

    @Test("unknown keys suggest the key that was meant", arguments: [
        ("comand", "command"), ("commnd", "command"), ("commands", "command"), ("kill-grace", "kill_grace"),
        ("KILL_GRACE", "kill_grace"), ("Kill-Grace", "kill_grace"), ("killgrace", "kill_grace"), ("evry", "every"),
        ("Every", "every"), ("EVERY", "every"), ("evrey", "every"), ("timeot", "timeout"), ("overlpa", "overlap"),
        ("leway", "leeway"), ("cwdd", "cwd"), ("argvv", "argv"), ("stat", "start"), ("metta", "meta"), ("ennv", "env"),
        ("counts", "count"), ("inn", "in"), ("att", "at"),
    ])
    func suggestion(typo: String, meant: String) {
        expectError(.badArgument, key: typo, mentions: ["unknown key \"\(typo)\"", "(did you mean \(meant)?)"]) {
            try Self.spec(opts(("every", "1s"), ("command", "x"), (typo, "1")))
        }
    }

    @Test("keys far from every known key get no suggestion", arguments: ["bogus", "schedule", "environment", "xyz", "", "program"])
    func noSuggestion(key: String) {
        let error = expectError(.badArgument, key: key) { try Self.spec(opts((key, "1"), ("every", "1s"), ("command", "x"))) }
        #expect(error?.message.contains("did you mean") == false, "\(error?.message ?? "")")
    }

    @Test("editDistance", arguments: [
        ("", "", 0), ("a", "", 1), ("", "abc", 3), ("abc", "abc", 0), ("comand", "command", 1), ("evry", "every", 1),
        ("kitten", "sitting", 3), ("flaw", "lawn", 2), ("µs", "us", 1),
        // Two adjacent characters swapped are one edit.
        ("ab", "ba", 1), ("comamnd", "command", 1),
    ])
    func editDistance(a: String, b: String, distance: Int) {
        #expect(KeySuggestion.editDistance(a, b) == distance)
        #expect(KeySuggestion.editDistance(b, a) == distance)
    }
}

/// Random valid specs for round-trip tests.
enum RandomSpec {
    static func duration(_ range: ClosedRange<Int64>, using rng: inout SeededGenerator) -> Duration {
        // Pick a magnitude first so short and long durations both show up.
        let digits = Int64.random(in: 0...18, using: &rng)
        var bound: Int64 = 1
        for _ in 0..<digits where bound < range.upperBound / 10 { bound *= 10 }
        let upper = max(range.lowerBound, min(range.upperBound, bound))
        return .nanoseconds(Int64.random(in: range.lowerBound...upper, using: &rng))
    }

    static let maximum = DurationText.maximum.nanoseconds

    static func pick<T>(_ items: [T], using rng: inout SeededGenerator) -> T { items[Int.random(in: 0..<items.count, using: &rng)] }

    static let wordPieces: [String] = [
        "a", "Z", "0", "-", "/", "=", " ", "  ", "\t", "\n", "'", "\"", "\\", "é", "日本", "😀", "$", "*", "#", "\r", "\u{7F}", "\u{1}",
        "\\n", "\\t", "x y",
    ]

    static func word(using rng: inout SeededGenerator) -> String {
        (0..<Int.random(in: 0...6, using: &rng)).map { _ in pick(wordPieces, using: &rng) }.joined()
    }

    static func text(using rng: inout SeededGenerator) -> String {
        let pieces = ["a", "b", "=", " ", "\t", "'", "\"", "\\", "ü", "😀", "\n", "$x", ";", "|"]
        return (0..<Int.random(in: 0...8, using: &rng)).map { _ in pick(pieces, using: &rng) }.joined()
    }

    static func make(using rng: inout SeededGenerator) -> JobSpec {
        let schedule: Schedule
        var count: Int?
        switch Int.random(in: 0..<3, using: &rng) {
        case 0:
            let start = Bool.random(using: &rng) ? duration(0...maximum, using: &rng) : nil
            schedule = .every(interval: duration(10_000_000...maximum, using: &rng), start: start)
            if Bool.random(using: &rng) { count = Int.random(in: 1...1_000_000, using: &rng) }
        case 1:
            schedule = .after(delay: duration(0...maximum, using: &rng))
        default:
            // Microsecond precision (what RFC3339.format keeps), before and after 1970.
            let micros = Int64.random(in: -9_000_000_000_000_000...9_000_000_000_000_000, using: &rng)
            schedule = .at(WallTime(nanosecondsSinceEpoch: micros * 1_000))
        }
        let action: Action
        if Bool.random(using: &rng) {
            action = .shell("run " + text(using: &rng))
        } else {
            action = .argv((0..<Int.random(in: 1...4, using: &rng)).map { _ in word(using: &rng) })
        }
        let envNames = ["A", "PATH", "_x", "lower", "X1", "timerd_ok", "TIMERDX", "A_B_C"]
        let metaNames = ["owner", "1st", "Team", "k_2", "_", "9"]
        let env = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
            KeyValue(pick(envNames, using: &rng), text(using: &rng))
        }
        var meta: [KeyValue] = []
        for name in metaNames where Int.random(in: 0..<3, using: &rng) == 0 {
            meta.append(KeyValue(name, text(using: &rng)))
        }
        meta.shuffle(using: &rng)
        return JobSpec(
            name: pick([name("a"), name("job-1"), name("x.y_z")], using: &rng),
            schedule: schedule,
            action: action,
            count: count,
            leeway: Bool.random(using: &rng) ? .zero : duration(0...maximum, using: &rng),
            timeout: Bool.random(using: &rng) ? nil : duration(1...maximum, using: &rng),
            killGrace: Bool.random(using: &rng) ? Limits.defaultKillGrace : duration(0...maximum, using: &rng),
            overlap: pick(OverlapPolicy.allCases, using: &rng),
            env: env,
            meta: meta,
            cwd: Bool.random(using: &rng) ? nil : "/" + text(using: &rng))
    }
}

@Suite("owner, tags and modes")
struct OwnerTagModeSpecTests {
    static let job = try! JobName("j")

    @Test("owner values", arguments: [("pid:42", Owner.process(42)), ("connection", .connection)])
    func owners(text: String, owner: Owner) throws {
        let spec = try JobSpec(name: Self.job, options: [KeyValue("in", "1s"), KeyValue("command", "true"), KeyValue("owner", text)])
        #expect(spec.owner == owner)
        #expect(spec.options.contains(KeyValue("owner", text)))
    }

    @Test("bad owners", arguments: ["pid:", "pid:1", "pid:0", "pid:-5", "pid:+5", "pid:x", "process:5", "", "Connection"])
    func badOwners(text: String) {
        #expect(throws: TimerdError(.badArgument, "")) {
            try JobSpec(name: Self.job, options: [KeyValue("in", "1s"), KeyValue("command", "true"), KeyValue("owner", text)])
        }
    }

    @Test("tags deduplicate and keep order; modes parse a list")
    func tagsAndModes() throws {
        let spec = try JobSpec(name: Self.job, options: [
            KeyValue("in", "1s"), KeyValue("command", "true"), KeyValue("tag", "b"), KeyValue("tag", "a"), KeyValue("tag", "b"),
            KeyValue("modes", " maintenance ,common,maintenance"),
        ])
        #expect(spec.tags == ["b", "a"])
        #expect(spec.modes == ["maintenance", "common"])
        #expect(try JobSpec(name: Self.job, options: spec.options) == spec)
        #expect(Mode.includes(["common"], "anything"))
        #expect(Mode.includes(["default"], "default"))
        #expect(!Mode.includes(["default"], "maintenance"))
    }

    @Test("bad tags and modes", arguments: [("tag", "a b"), ("tag", ""), ("modes", ""), ("modes", "a,,b"), ("modes", "x y")])
    func badNames(key: String, value: String) {
        #expect(throws: TimerdError(.badArgument, "")) {
            try JobSpec(name: Self.job, options: [KeyValue("in", "1s"), KeyValue("command", "true"), KeyValue(key, value)])
        }
    }

    // MARK: - Kept small (docs/architecture.md, "Memory per job")

    @Test("the keys most jobs leave unset are out of line, and a change to them is a change of the spec")
    func rareKeys() throws {
        // The daemon keeps a spec for every job: 490 bytes inline before, 169 now (bounds, not exact
        // sizes, so a compiler's layout may move a little).
        #expect(MemoryLayout<JobSpec>.size <= 176)
        #expect(MemoryLayout<RareKeys>.size == MemoryLayout<Int>.size)
        #expect(MemoryLayout<Action>.size <= 17)
        let plain = try JobSpecTests.spec(opts(("every", "5s"), ("command", "true")))
        var changed = plain
        changed.cwd = "/tmp"
        changed.env = [KeyValue("A", "1")]
        #expect(changed != plain)
        #expect(changed.cwd == "/tmp" && changed.env == [KeyValue("A", "1")] && plain.cwd == nil && plain.env.isEmpty)
        #expect(try JobSpecTests.spec(changed.options) == changed)
        // Back to the defaults: equal to a spec that never had them.
        changed.cwd = nil
        changed.env = []
        #expect(changed == plain)
        let hook = try JobSpecTests.spec(opts(("every", "5s"), ("webhook", "https://example.com/hook"), ("retries", "2")))
        guard case .webhook(let webhook) = hook.action else { Issue.record("not a webhook"); return }
        #expect(webhook.retries == 2)
    }
}
