/// What a job runs: a shell command line or an argv run without a shell.
public enum Action: Equatable, Sendable {
    /// Run by `/bin/sh -c`.
    case shell(String)
    /// Run directly; `argv[0]` is looked up in `PATH` when it has no slash.
    case argv([String])
    /// An HTTP(S) request (out of line: a `Webhook` is 145 bytes, a command line 16, and every job
    /// keeps its action).
    indirect case webhook(Webhook)

    /// For logs: a webhook's URL without secrets (see `Webhook.redactedURL`).
    public var summary: String {
        switch self {
        case .shell(let line): return line
        case .argv(let words): return words.joined(separator: " ")
        case .webhook(let hook): return "\(hook.method) \(hook.redactedURL)"
        }
    }
}

/// What a fire does when the job's previous run is still going.
public enum OverlapPolicy: String, Equatable, Sendable, CaseIterable {
    /// Drop this fire (the default), and say so.
    case skip
    /// Keep at most one pending fire and start it when the running one ends.
    case queue
    /// Start another run alongside.
    case allow
    /// Stop the running one (SIGTERM, then SIGKILL after `kill_grace`) and start anew.
    case replace
}

/// What stopping a run signals (`kill_mode`, systemd's `KillMode=`): at a timeout, `replace`,
/// the daemon's stop, and when its main process exits.
public enum KillMode: String, Equatable, Sendable, CaseIterable {
    /// Everything the run started: SIGTERM to every process of its cgroup, then SIGKILL to the whole
    /// cgroup after `kill_grace` (the default). When the main process exits, what it left behind is
    /// stopped the same way, and the run ends when its cgroup is empty.
    case controlGroup = "control-group"
    /// SIGTERM to the main process only, then SIGKILL to the whole cgroup; what the main process left
    /// behind when it exits is killed at once.
    case mixed
    /// The main process only; what it started is left alone, and the run ends with it.
    case process
}

/// One key/value pair, in the order given (keys such as `env` and `meta` repeat).
public struct KeyValue: Equatable, Hashable, Sendable {
    public var key: String
    public var value: String
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// A job's full description: one spec for three surfaces (config keys, protocol options, `timerctl` flags).
///
/// Built and validated by `JobSpec.init(name:options:argv:)`; `options` turns it back into the same keys,
/// so `JobSpec(name:options: spec.options, argv: nil) == spec`.
public struct JobSpec: Equatable, Sendable {
    // Stored in this order so that the one-byte fields fill the gaps after the enums: a spec is kept for
    // every job. The keys most jobs leave unset (`timezone`, `env`, `cwd`, `owner`, …) are in `rare`,
    // out of line (`JobSpec+Rare.swift`).
    public var name: JobName
    /// A random delay added to each fire, up to this long (`jitter=`).
    public var jitter: Duration
    /// A fire handled at most this late still runs as scheduled (`misfire_grace=`).
    public var misfireGrace: Duration
    /// How late the timer may fire to let the kernel coalesce wake-ups.
    public var leeway: Duration
    /// After `timeout`, SIGKILL this long after SIGTERM.
    public var killGrace: Duration
    /// How many finished runs of this job the state store keeps (`history_limit=`).
    public var historyLimit: Int
    /// Labels for acting on many jobs at once (`tag=`, repeatable).
    public var tags: [String]
    /// The daemon modes the job fires in (`modes=`, default `default`; `common` means every mode).
    public var modes: [String]
    var rare: RareKeys
    public var schedule: Schedule
    /// The delay is the same for every fire, derived from the machine id and the job's name
    /// (`fixed_jitter=yes`, like systemd's `FixedRandomDelay=`).
    public var fixedJitter: Bool
    /// What happens to fires that were missed: while timerd was down, or handled later than
    /// `misfireGrace` (`misfire=`).
    public var misfire: MisfirePolicy
    public var overlap: OverlapPolicy
    public var action: Action

    public init(
        name: JobName, schedule: Schedule, action: Action, count: Int? = nil, leeway: Duration = .zero,
        timeout: Duration? = nil, killGrace: Duration = Limits.defaultKillGrace, overlap: OverlapPolicy = .skip,
        env: [KeyValue] = [], meta: [KeyValue] = [], cwd: String? = nil, owner: Owner? = nil, tags: [String] = [],
        modes: [String] = [Mode.defaultName], onFailure: NotifyTarget? = nil, onRecovery: NotifyTarget? = nil,
        timezone: String? = nil, dstGap: DSTGap? = nil, dstRepeat: DSTRepeat? = nil, jitter: Duration = .zero,
        fixedJitter: Bool = false, misfire: MisfirePolicy = .skip, misfireGrace: Duration = Limits.defaultMisfireGrace,
        historyLimit: Int = Limits.defaultHistoryLimit, user: String? = nil, group: String? = nil, cluster: Bool? = nil
    ) {
        self.name = name
        self.misfire = misfire
        self.misfireGrace = misfireGrace
        self.historyLimit = historyLimit
        self.jitter = jitter
        self.fixedJitter = fixedJitter
        self.schedule = schedule
        self.action = action
        self.leeway = leeway
        self.killGrace = killGrace
        self.overlap = overlap
        self.tags = tags
        self.modes = modes
        rare = RareKeys(RareKeys.Values(
            timezone: timezone, dstGap: dstGap, dstRepeat: dstRepeat, count: count, timeout: timeout, env: env, meta: meta,
            cwd: cwd, user: user, group: group, owner: owner, onFailure: onFailure, onRecovery: onRecovery, cluster: cluster))
    }

    /// Every key a job accepts, in the order `options` writes them. The same list documents config keys,
    /// protocol options and (as `--kebab-case`) `timerctl` flags.
    public static let keys = [
        "every", "start", "in", "at", "cron", "calendar", "timezone", "dst_gap", "dst_repeat", "jitter",
        "fixed_jitter", "misfire", "misfire_grace", "count", "leeway", "command", "argv", "webhook", "method", "header", "body",
        "content_type", "expect", "retries", "retry_backoff", "redirects", "ca_file", "insecure", "timeout",
        "kill_grace", "kill_mode",
    ] + ResourceSettings.keys + [
        "success_exit_codes", "fail_on_stderr", "pause_after_failures", "pool", "log_file", "log_max_size", "log_keep",
        "after", "after_result", "overlap", "env", "meta", "cwd", "user", "group", "owner", "tag", "modes", "on_failure",
        "on_recovery", "history_limit", "cluster", "run_on",
    ]
    /// Keys anyone may see of anyone's job: the name, schedule, limits and labels. The rest (the action,
    /// `env`, `meta`, `cwd`, hooks) is shown only to the job's owner and root (see `docs/security.md`).
    public static let publicKeys: Set<String> = Set([
        "every", "start", "in", "at", "cron", "calendar", "timezone", "dst_gap", "dst_repeat", "jitter", "fixed_jitter",
        "misfire", "misfire_grace", "count", "leeway", "timeout", "kill_grace", "kill_mode", "overlap", "user", "group", "owner",
        "tag", "modes", "history_limit", "cluster", "success_exit_codes", "fail_on_stderr", "pause_after_failures", "pool",
        "after", "after_result", "run_on",
    ] + ResourceSettings.keys)
    /// Keys that may be given more than once.
    public static let repeatableKeys: Set<String> = ["env", "meta", "tag", "header"]

    /// Why a job without an action is refused. `programAfterDashes`: whether the request can give the
    /// program after `--` (a protocol request can; a config file has no `--`, so its diagnostic leaves it out).
    public static func actionRequired(programAfterDashes: Bool) -> String {
        "an action is required: command=STRING, argv=WORDS" + (programAfterDashes ? ", webhook=URL or a program after --" : " or webhook=URL")
    }

    /// Builds a spec from `key=value` options and an optional argv (the words after `--`).
    ///
    /// Throws `bad-argument` (with `key` set to the offending key) or `missing-argument`.
    /// The keys that each give the schedule (one at most).
    private static let scheduleKeys = ["every", "in", "at", "cron", "calendar"]

    public init(name: JobName, options: [KeyValue], argv: [String]? = nil) throws(TimerdError) {
        var single: OptionValues = [:]
        var env: [KeyValue] = []
        var meta: [KeyValue] = []
        var tags: [String] = []
        var seenTags: Set<String> = []
        var headers: [String] = []
        for option in options {
            switch option.key {
            case "header":
                headers.append(try Webhook.validateHeader(option.value))
            case "tag":
                let tag = try Mode.validName(option.value, key: "tag", what: "tag")
                if seenTags.insert(tag).inserted { tags.append(tag) }
            case "env":
                env.append(try Self.parsePair(option.value, key: "env", namePattern: .environment))
            case "meta":
                meta.append(try Self.parsePair(option.value, key: "meta", namePattern: .meta))
            case let key where Self.keys.contains(key):
                guard !option.value.utf8.contains(0) else {
                    throw TimerdError(.badArgument, "\(key): value contains a NUL byte", key: key)
                }
                guard single[key] == nil else {
                    throw TimerdError(.badArgument, "\(key) is given more than once", key: key)
                }
                single[key] = option.value
            default:
                throw TimerdError(.badArgument, "unknown key \"\(option.key)\"\(KeySuggestion.suggest(for: option.key, among: Self.keys))", key: option.key)
            }
        }
        // With sets, not by comparing each pair with all before it: a 64 KiB request line holds thousands.
        var metaKeys: Set<String> = []
        for pair in meta where !metaKeys.insert(pair.key.uppercased()).inserted {
            throw TimerdError(.badArgument, "meta key \(pair.key) is given more than once", key: "meta")
        }
        func duration(_ key: String) throws(TimerdError) -> Duration? {
            guard let text = single[key] else { return nil }
            do { return try DurationText.parse(text) } catch { throw TimerdError(.badArgument, "\(key): \(error.message)", key: key) }
        }

        // Schedule: exactly one of every / in / at / cron / calendar.
        let given = options.map(\.key).filter(Self.scheduleKeys.contains)
        guard given.count <= 1 else {
            throw TimerdError(.badArgument, "give only one of every, in, at, cron and calendar (got \(given.joined(separator: ", ")))", key: given[1])
        }
        let schedule: Schedule
        if let interval = try duration("every") {
            guard interval >= Limits.minimumInterval else {
                throw TimerdError(.badArgument, "every: interval must be at least \(DurationText.format(Limits.minimumInterval))", key: "every")
            }
            schedule = .every(interval: interval, start: try duration("start"))
        } else {
            if single["start"] != nil {
                throw TimerdError(.badArgument, "start applies only to every= jobs (use in= for a one-shot delay)", key: "start")
            }
            if let delay = try duration("in") {
                schedule = .after(delay: delay)
            } else if let text = single["at"] {
                // Microseconds are what timerd shows and writes back, so that is what it keeps.
                do { schedule = .at(RFC3339.truncatedToMicroseconds(try RFC3339.parse(text))) } catch {
                    throw TimerdError(.badArgument, "at: \(error.message)", key: "at")
                }
            } else if let text = single["cron"] {
                schedule = .cron(try CronExpression.parse(text))
            } else if let text = single["calendar"] {
                schedule = .calendar(try CalendarSpec.parse(text))
            } else if single["after"] != nil {
                schedule = .triggered  // only when its upstream's run ends
            } else {
                throw TimerdError(.missingArgument, "a schedule is required: every=DUR, in=DUR, at=TIME, cron=EXPR, calendar=SPEC, or after=JOB")
            }
        }
        let civil = try Self.civilRules(schedule: schedule, single: single)
        let jitter = try duration("jitter") ?? .zero
        if case .every(let interval, _) = schedule, jitter >= interval {
            throw TimerdError(.badArgument, "jitter must be shorter than the interval (\(DurationText.format(interval)))", key: "jitter")
        }
        var fixedJitter = false
        if let text = single["fixed_jitter"] {
            fixedJitter = try ExecRequest.parseBool(text, key: "fixed_jitter")
            guard single["jitter"] != nil else {
                throw TimerdError(.badArgument, "fixed_jitter applies only with jitter=DUR", key: "fixed_jitter")
            }
        }

        var misfire = MisfirePolicy.skip
        if let text = single["misfire"] {
            guard let value = MisfirePolicy(rawValue: text) else {
                throw TimerdError(.badArgument, "misfire: expected skip, once or all, got \"\(text)\"", key: "misfire")
            }
            misfire = value
        }
        let misfireGrace = try duration("misfire_grace") ?? Limits.defaultMisfireGrace
        // Normal lateness is well under a millisecond; a grace near it would count healthy fires as missed.
        guard misfireGrace >= Limits.minimumMisfireGrace else {
            throw TimerdError(.badArgument, "misfire_grace must be at least \(DurationText.format(Limits.minimumMisfireGrace))", key: "misfire_grace")
        }
        let historyLimit = try Self.wholeNumber(single, "history_limit", 0...Limits.maximumHistoryLimit) ?? Limits.defaultHistoryLimit

        var count: Int?
        if let text = single["count"] {
            guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text), value >= 1 else {
                throw TimerdError(.badArgument, "count: expected a whole number of runs ≥ 1, got \"\(text)\"", key: "count")
            }
            guard schedule.repeats else {
                throw TimerdError(.badArgument, "count applies only to repeating schedules (one-shots run once)", key: "count")
            }
            count = value
        }

        // Action: exactly one of command / argv key / words after `--`.
        var actions: [Action] = []
        if let line = single["command"] {
            guard !line.allSatisfy({ $0.isWhitespace }) else {
                throw TimerdError(.badArgument, "command is empty", key: "command")
            }
            actions.append(.shell(line))
        }
        if let text = single["argv"] {
            let words: [String]
            do { words = try Words.split(text) } catch { throw TimerdError(.badArgument, "argv: \(error.message)", key: "argv") }
            guard !words.isEmpty else { throw TimerdError(.badArgument, "argv is empty", key: "argv") }
            actions.append(.argv(words))
        }
        if let argv {
            guard !argv.isEmpty else { throw TimerdError(.badArgument, "nothing after --: give the program and its arguments", key: "argv") }
            guard !argv.contains(where: { $0.utf8.contains(0) }) else {
                throw TimerdError(.badArgument, "argv: a word contains a NUL byte", key: "argv")
            }
            actions.append(.argv(argv))
        }
        if let url = single["webhook"] {
            actions.append(.webhook(try Self.webhook(url: url, single: single, headers: headers, meta: meta)))
        } else if let key = Webhook.keys.first(where: { single[$0] != nil && !Self.retryKeyNames.contains($0) })
                    ?? (headers.isEmpty ? nil : "header") {
            throw TimerdError(.badArgument, "\(key) applies only to webhook= jobs", key: key)
        }
        guard actions.count <= 1 else {
            let key = ["command", "argv", "webhook"].first { single[$0] != nil } ?? "argv"
            throw TimerdError(.badArgument, "give only one action: command=, argv=, webhook= or words after --", key: key)
        }
        guard let action = actions.first else {
            throw TimerdError(.missingArgument, Self.actionRequired(programAfterDashes: true))
        }

        var overlap = OverlapPolicy.skip
        if let text = single["overlap"] {
            guard let value = OverlapPolicy(rawValue: text) else {
                throw TimerdError(.badArgument, "overlap: expected skip, queue, allow or replace, got \"\(text)\"", key: "overlap")
            }
            overlap = value
        }
        if let cwd = single["cwd"] {
            guard cwd.hasPrefix("/") else { throw TimerdError(.badArgument, "cwd must be an absolute path, got \"\(cwd)\"", key: "cwd") }
        }
        let timeout = try duration("timeout")
        if let timeout, timeout <= .zero { throw TimerdError(.badArgument, "timeout must be greater than 0", key: "timeout") }
        let user = try single["user"].map { name throws(TimerdError) in try AccountName.validate(name, key: "user") }
        let group = try single["group"].map { name throws(TimerdError) in try AccountName.validate(name, key: "group") }
        let cluster = try single["cluster"].map { text throws(TimerdError) in try ExecRequest.parseBool(text, key: "cluster") }
        if cluster == true, single["owner"] != nil {
            throw TimerdError(.badArgument, "owner= jobs live and end on one node, so they cannot be cluster jobs (cluster=yes)", key: "cluster")
        }
        let runOn = try single["run_on"].map { text throws(TimerdError) in try Mode.parseNames(text, key: "run_on", what: "tag") } ?? []
        if !runOn.isEmpty, cluster == false {
            throw TimerdError(.badArgument, "run_on= places shared jobs on the cluster's nodes; a cluster=no job runs on the node that has it", key: "run_on")
        }
        if !runOn.isEmpty, single["owner"] != nil {
            throw TimerdError(.badArgument, "run_on= places shared jobs on the cluster's nodes; an owner= job lives and ends on the node that has it", key: "run_on")
        }
        if case .webhook = action,
           let key = user != nil ? "user" : group != nil ? "group"
               : (["kill_mode", "success_exit_codes", "fail_on_stderr", "log_file", "log_max_size", "log_keep"] + ResourceSettings.keys)
                   .first(where: { single[$0] != nil }) {
            throw TimerdError(.badArgument, "\(key) applies only to commands (webhooks are sent by timerd itself)", key: key)
        }
        let killMode = try single["kill_mode"].map { text throws(TimerdError) in
            guard let mode = KillMode(rawValue: text) else {
                throw TimerdError(.badArgument, "kill_mode: expected control-group, mixed or process, got \"\(text)\"", key: "kill_mode")
            }
            return mode
        }

        self.init(
            name: name, schedule: schedule, action: action, count: count, leeway: try duration("leeway") ?? .zero,
            timeout: timeout, killGrace: try duration("kill_grace") ?? Limits.defaultKillGrace, overlap: overlap,
            env: env, meta: meta, cwd: single["cwd"], owner: try single["owner"].map(Owner.parse),
            tags: tags, modes: try single["modes"].map(Mode.parseList) ?? [Mode.defaultName],
            onFailure: try single["on_failure"].map { text throws(TimerdError) in try NotifyTarget.parse(text, key: "on_failure") },
            onRecovery: try single["on_recovery"].map { text throws(TimerdError) in try NotifyTarget.parse(text, key: "on_recovery") },
            timezone: civil.timezone, dstGap: civil.gap, dstRepeat: civil.repeated, jitter: jitter, fixedJitter: fixedJitter,
            misfire: misfire, misfireGrace: misfireGrace, historyLimit: historyLimit, user: user, group: group,
            cluster: cluster)
        self.killMode = killMode
        self.runOn = runOn
        if case .webhook = action {} else {
            // A command's retries: each attempt is a run of its own (the engine's, `docs/configuration.md`).
            let (retries, backoff) = try Self.retryKeys(single)
            if backoff != nil, retries == nil {
                throw TimerdError(.badArgument, "retry_backoff applies only with retries=N", key: "retry_backoff")
            }
            self.commandRetries = retries.map { RetryPolicy(retries: $0, backoff: backoff ?? Webhook.defaultBackoff) }
        }
        self.resources = try ResourceSettings(single: single)
        self.successExitCodes = try single["success_exit_codes"].map { text throws(TimerdError) in
            try ExitCodes.parse(text, key: "success_exit_codes")
        }
        self.failOnStderr = try single["fail_on_stderr"].map { text throws(TimerdError) in
            try ExecRequest.parseBool(text, key: "fail_on_stderr")
        }
        self.pool = try single["pool"].map { text throws(TimerdError) in try Mode.validName(text, key: "pool", what: "pool name") }
        self.logFile = try Self.logFile(single)
        if let text = single["after"] {
            let upstream = try JobName(text)
            guard upstream != name else {
                throw TimerdError(.badArgument, "after: a job cannot follow itself", key: "after")
            }
            self.after = upstream
        }
        if let text = single["after_result"] {
            guard let result = AfterResult(rawValue: text) else {
                throw TimerdError(.badArgument, "after_result: expected success, failure or any, got \"\(text)\"", key: "after_result")
            }
            guard single["after"] != nil else {
                throw TimerdError(.badArgument, "after_result applies only with after=JOB", key: "after_result")
            }
            self.afterResult = result
        }
        if let count = try Self.wholeNumber(
            single, "pause_after_failures", 1...Limits.maximumPauseAfterFailures, what: "a number of failed runs in a row") {
            guard schedule.repeats else {
                throw TimerdError(.badArgument, "pause_after_failures applies only to repeating schedules (a one-shot runs once)", key: "pause_after_failures")
            }
            self.pauseAfterFailures = count
        }
    }

    /// `log_file` (an absolute path), with `log_max_size` (a size, at least 4K) and `log_keep` (0 to 100).
    static func logFile(_ single: OptionValues) throws(TimerdError) -> LogFileSpec? {
        guard let path = single["log_file"] else {
            if let key = ["log_max_size", "log_keep"].first(where: { single[$0] != nil }) {
                throw TimerdError(.badArgument, "\(key) applies only with log_file=PATH", key: key)
            }
            return nil
        }
        guard path.hasPrefix("/"), !path.hasSuffix("/") else {
            throw TimerdError(.badArgument, "log_file must be an absolute path to a file, got \"\(path)\"", key: "log_file")
        }
        var spec = LogFileSpec(path: path)
        if let text = single["log_max_size"] {
            guard let size = ByteCount.parse(text), size >= 4_096 else {
                throw TimerdError(.badArgument, "log_max_size: expected a size of at least 4K, like 512K or 10M, got \"\(text)\"", key: "log_max_size")
            }
            spec.maxSize = size
        }
        if let keep = try wholeNumber(single, "log_keep", 0...100, what: "a whole number of old files") { spec.keep = keep }
        return spec
    }

    /// `single[key]` as a whole number in `range` (digits only: no sign, no spaces), nil when not given;
    /// otherwise `bad-argument`: "KEY: expected WHAT from LOW to HIGH, got "TEXT"".
    static func wholeNumber(
        _ single: OptionValues, _ key: String, _ range: ClosedRange<Int>, what: String = "a whole number"
    ) throws(TimerdError) -> Int? {
        guard let text = single[key] else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text), range.contains(value) else {
            throw TimerdError(.badArgument, "\(key): expected \(what) from \(range.lowerBound) to \(range.upperBound), got \"\(text)\"", key: key)
        }
        return value
    }

    /// The keys of retries, which webhooks (each attempt within one run) and commands (each attempt a run)
    /// take alike.
    static let retryKeyNames: Set<String> = ["retries", "retry_backoff"]

    /// `retries` (0 to `Webhook.maximumRetries`) and `retry_backoff` (more than 0, at most
    /// `Webhook.maximumBackoff`), each nil when not given.
    static func retryKeys(_ single: OptionValues) throws(TimerdError) -> (retries: Int?, backoff: Duration?) {
        let retries = try wholeNumber(single, "retries", 0...Webhook.maximumRetries)
        var backoff: Duration?
        if let text = single["retry_backoff"] {
            let value: Duration
            do { value = try DurationText.parse(text) } catch { throw TimerdError(.badArgument, "retry_backoff: \(error.message)", key: "retry_backoff") }
            guard value > .zero, value <= Webhook.maximumBackoff else {
                throw TimerdError(.badArgument, "retry_backoff: expected more than 0 and at most \(DurationText.format(Webhook.maximumBackoff))", key: "retry_backoff")
            }
            backoff = value
        }
        return (retries, backoff)
    }

    /// `timezone`, `dst_gap` and `dst_repeat`, which only cron and calendar schedules take. The zone's
    /// existence is checked where the tz database is (the daemon, the config checker, `timerctl next`).
    private static func civilRules(
        schedule: Schedule, single: OptionValues
    ) throws(TimerdError) -> (timezone: String?, gap: DSTGap?, repeated: DSTRepeat?) {
        guard schedule.isCivil else {
            if let key = ["timezone", "dst_gap", "dst_repeat"].first(where: { single[$0] != nil }) {
                throw TimerdError(.badArgument, "\(key) applies only to cron= and calendar= jobs", key: key)
            }
            return (nil, nil, nil)
        }
        var timezone = single["timezone"]
        if let name = timezone { try TimeZoneDatabase.validate(name) }
        if case .calendar(let spec) = schedule, let named = spec.timeZone {
            if let timezone, timezone != named {
                throw TimerdError(.badArgument, "timezone=\(timezone) contradicts the zone in the calendar spec (\(named))", key: "timezone")
            }
            timezone = named
        }
        var gap: DSTGap?
        if let text = single["dst_gap"] {
            guard let value = DSTGap(rawValue: text) else {
                throw TimerdError(.badArgument, "dst_gap: expected shift or skip, got \"\(text)\"", key: "dst_gap")
            }
            gap = value
        }
        var repeated: DSTRepeat?
        if let text = single["dst_repeat"] {
            guard let value = DSTRepeat(rawValue: text) else {
                throw TimerdError(.badArgument, "dst_repeat: expected first, last or both, got \"\(text)\"", key: "dst_repeat")
            }
            repeated = value
        }
        return (timezone, gap, repeated)
    }


    /// The `webhook=` action with its keys.
    private static func webhook(url: String, single: OptionValues, headers: [String], meta: [KeyValue]) throws(TimerdError) -> Webhook {
        var hook = Webhook(url: try Webhook.validateURL(url), headers: headers)
        if let method = single["method"] {
            guard Webhook.methods.contains(method.uppercased()) else {
                throw TimerdError(.badArgument, "method: expected one of \(Webhook.methods.joined(separator: ", ")), got \"\(method)\"", key: "method")
            }
            hook.method = method.uppercased()
        }
        if let body = single["body"] {
            guard hook.hasBody else {
                throw TimerdError(.badArgument, "body: a \(hook.method) request has no body", key: "body")
            }
            try Webhook.validateBody(body, metaKeys: meta.map(\.key))
            hook.body = body
        }
        if let type = single["content_type"] {
            guard !type.isEmpty, !type.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                throw TimerdError(.badArgument, "content_type: expected a MIME type like application/json", key: "content_type")
            }
            hook.contentType = type
        }
        let (retries, backoff) = try retryKeys(single)
        hook.retries = retries ?? 0
        hook.redirects = try wholeNumber(single, "redirects", 0...Webhook.maximumRedirects) ?? 0
        if let backoff { hook.retryBackoff = backoff }
        if let text = single["expect"] { hook.expect = try StatusSet.parse(text) }
        if let path = single["ca_file"] {
            guard path.hasPrefix("/") else { throw TimerdError(.badArgument, "ca_file must be an absolute path, got \"\(path)\"", key: "ca_file") }
            hook.caFile = path
        }
        if let text = single["insecure"] { hook.insecure = try ExecRequest.parseBool(text, key: "insecure") }
        if hook.caFile != nil || hook.insecure, !hook.url.lowercased().hasPrefix("https://") {
            throw TimerdError(.badArgument, "\(hook.caFile != nil ? "ca_file" : "insecure") applies only to https:// URLs", key: hook.caFile != nil ? "ca_file" : "insecure")
        }
        return hook
    }

    /// The spec as canonical `key=value` options (argv jobs use the `argv` key, quoted word by word).
    public var options: [KeyValue] {
        var list: [KeyValue] = []
        list.reserveCapacity(8)
        switch schedule {
        case .every(let interval, let start):
            list.append(KeyValue("every", DurationText.format(interval)))
            if let start { list.append(KeyValue("start", DurationText.format(start))) }
        case .after(let delay): list.append(KeyValue("in", DurationText.format(delay)))
        case .at(let time): list.append(KeyValue("at", RFC3339.format(time)))
        case .cron(let expression): list.append(KeyValue("cron", expression.text))
        case .calendar(let spec): list.append(KeyValue("calendar", spec.text))
        case .triggered: break  // `after=` says it, below
        }
        // A zone named in the calendar spec is written there; timezone= repeats it only when it was separate.
        if let timezone, !{ if case .calendar(let spec) = schedule { return spec.timeZone != nil }; return false }() {
            list.append(KeyValue("timezone", timezone))
        }
        if let dstGap { list.append(KeyValue("dst_gap", dstGap.rawValue)) }
        if let dstRepeat { list.append(KeyValue("dst_repeat", dstRepeat.rawValue)) }
        if jitter != .zero { list.append(KeyValue("jitter", DurationText.format(jitter))) }
        if fixedJitter { list.append(KeyValue("fixed_jitter", "yes")) }
        if misfire != .skip { list.append(KeyValue("misfire", misfire.rawValue)) }
        if misfireGrace != Limits.defaultMisfireGrace { list.append(KeyValue("misfire_grace", DurationText.format(misfireGrace))) }
        if let count { list.append(KeyValue("count", String(count))) }
        if leeway != .zero { list.append(KeyValue("leeway", DurationText.format(leeway))) }
        switch action {
        case .shell(let line): list.append(KeyValue("command", line))
        case .argv(let words): list.append(KeyValue("argv", words.map(Words.quote).joined(separator: " ")))
        case .webhook(let hook):
            list.append(KeyValue("webhook", hook.url))
            if hook.method != "POST" { list.append(KeyValue("method", hook.method)) }
            list += hook.headers.map { KeyValue("header", $0) }
            if let body = hook.body { list.append(KeyValue("body", body)) }
            if let type = hook.contentType { list.append(KeyValue("content_type", type)) }
            if hook.expect != .success { list.append(KeyValue("expect", hook.expect.description)) }
            if hook.retries != 0 { list.append(KeyValue("retries", String(hook.retries))) }
            if hook.retryBackoff != Webhook.defaultBackoff { list.append(KeyValue("retry_backoff", DurationText.format(hook.retryBackoff))) }
            if hook.redirects != 0 { list.append(KeyValue("redirects", String(hook.redirects))) }
            if let path = hook.caFile { list.append(KeyValue("ca_file", path)) }
            if hook.insecure { list.append(KeyValue("insecure", "yes")) }
        }
        if let timeout { list.append(KeyValue("timeout", DurationText.format(timeout))) }
        if killGrace != Limits.defaultKillGrace { list.append(KeyValue("kill_grace", DurationText.format(killGrace))) }
        if let killMode { list.append(KeyValue("kill_mode", killMode.rawValue)) }
        if let commandRetries {
            list.append(KeyValue("retries", String(commandRetries.retries)))
            if commandRetries.backoff != Webhook.defaultBackoff {
                list.append(KeyValue("retry_backoff", DurationText.format(commandRetries.backoff)))
            }
        }
        list += resources.options
        if let successExitCodes { list.append(KeyValue("success_exit_codes", ExitCodes.format(successExitCodes))) }
        if let failOnStderr { list.append(KeyValue("fail_on_stderr", failOnStderr ? "yes" : "no")) }
        if let pauseAfterFailures { list.append(KeyValue("pause_after_failures", String(pauseAfterFailures))) }
        if let pool { list.append(KeyValue("pool", pool)) }
        if let after { list.append(KeyValue("after", after.rawValue)) }
        if let afterResult { list.append(KeyValue("after_result", afterResult.rawValue)) }
        if let logFile {
            list.append(KeyValue("log_file", logFile.path))
            if logFile.maxSize != LogFileSpec.defaultMaxSize { list.append(KeyValue("log_max_size", ByteCount.format(UInt64(logFile.maxSize)))) }
            if logFile.keep != LogFileSpec.defaultKeep { list.append(KeyValue("log_keep", String(logFile.keep))) }
        }
        if overlap != .skip { list.append(KeyValue("overlap", overlap.rawValue)) }
        list += env.map { KeyValue("env", "\($0.key)=\($0.value)") }
        list += meta.map { KeyValue("meta", "\($0.key)=\($0.value)") }
        if let cwd { list.append(KeyValue("cwd", cwd)) }
        if let user { list.append(KeyValue("user", user)) }
        if let group { list.append(KeyValue("group", group)) }
        if let owner { list.append(KeyValue("owner", owner.description)) }
        list += tags.map { KeyValue("tag", $0) }
        if modes.count != 1 || modes[0] != Mode.defaultName { list.append(KeyValue("modes", modes.joined(separator: ","))) }
        if let onFailure { list.append(KeyValue("on_failure", onFailure.description)) }
        if let onRecovery { list.append(KeyValue("on_recovery", onRecovery.description)) }
        if historyLimit != Limits.defaultHistoryLimit { list.append(KeyValue("history_limit", String(historyLimit))) }
        if let cluster { list.append(KeyValue("cluster", cluster ? "yes" : "no")) }
        if !runOn.isEmpty { list.append(KeyValue("run_on", runOn.joined(separator: ","))) }
        return list
    }

    // MARK: - Helpers

    enum PairNames { case environment, meta }

    static func parsePair(_ text: String, key: String, namePattern: PairNames) throws(TimerdError) -> KeyValue {
        guard let equals = text.firstIndex(of: "=") else {
            throw TimerdError(.badArgument, "\(key): expected NAME=VALUE, got \"\(text)\"", key: key)
        }
        let name = String(text[..<equals])
        let value = String(text[text.index(after: equals)...])
        let bytes = Array(name.utf8)
        let valid = !bytes.isEmpty && bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        } && !(bytes[0] >= 0x30 && bytes[0] <= 0x39 && namePattern == .environment)
        guard valid else {
            throw TimerdError(.badArgument, "\(key): invalid name \"\(name)\" (letters, digits and _ only)", key: key)
        }
        if namePattern == .environment, name.hasPrefix("TIMERD_") {
            throw TimerdError(.badArgument, "env: \(name) is reserved (TIMERD_* variables are set by timerd)", key: key)
        }
        guard !value.utf8.contains(0) else { throw TimerdError(.badArgument, "\(key): value contains a NUL byte", key: key) }
        return KeyValue(name, value)
    }
}
