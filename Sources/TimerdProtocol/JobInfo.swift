import FoundationEssentials
import TimerdCore

/// What `LIST` and `SHOW` report about a job: the JSON object of `OK <json>` replies and of
/// `timerctl --json`. Field names are snake_case and stable (documented in `docs/protocol.md`).
public struct JobInfo: Codable, Equatable, Sendable {
    /// `waiting`: a shared job no live member of the cluster can run now (`waiting_reason` says why).
    public enum State: String, Codable, Sendable { case scheduled, paused, finished, waiting }
    public enum Result: String, Codable, Sendable { case ok, failed, timeout, killed }

    public var name: String
    public var state: State
    /// `config` or `runtime`.
    public var source: String
    /// `file:line` of the job's section, for config jobs.
    public var declared_at: String?
    /// Human-readable schedule, e.g. `every 5s`.
    public var schedule: String
    /// The job's spec as canonical `key=value` options (same keys as the config file).
    public var options: [String]
    /// RFC 3339 (UTC) of the next fire, or null when paused or finished.
    public var next_fire: String?
    /// Cron and calendar jobs: the zone their schedule is computed in, the next fire as local time with
    /// its offset, and the DST rules in force (`dst_gap=shift dst_repeat=first`, or `systemd`).
    public var timezone: String?
    public var next_fire_local: String?
    public var dst_rules: String?
    /// The last few finished runs from the state store, newest first (absent from `LIST`).
    public var recent_runs: [RunRecord]?
    /// Runs started (scheduled and manual).
    public var runs: Int
    /// Runs in progress now.
    public var running: Int
    /// Fires that did not run (each one logged with its reason).
    public var skipped: Int
    /// Fires waiting: queued behind a running one (`overlap=queue`) or for a run slot (`max_running`).
    public var pending: Int
    public var last_run: Int?
    public var last_started: String?
    public var last_finished: String?
    public var last_result: Result?
    public var last_exit_code: Int?
    public var last_signal: Int?
    /// The HTTP status of a webhook run's last attempt (null for commands, and when no response came).
    public var last_http_status: Int?
    public var last_duration_ms: Double?
    /// What the last run of a command used (null where unknown; `docs/observability.md`, "Resource
    /// accounting"): CPU time, the most memory in use at once, bytes read and written.
    public var last_cpu_usage_ms: Double?
    public var last_memory_peak_bytes: Int64?
    public var last_io_read_bytes: Int64?
    public var last_io_write_bytes: Int64?
    /// How late the last run started compared with its scheduled time.
    public var last_lateness_ms: Double?
    /// Why the last run ended the way it did (e.g. "timed out after 5s; killed with SIGTERM").
    public var last_reason: String?
    /// The last 4 KiB of the last run's combined stdout/stderr.
    public var last_output: String?
    /// The most recent fire that did not run, and why.
    public var last_skip: SkippedFire?
    /// `pid:N` or `connection` when the job is bound to an owner (cancelled when it goes away).
    public var owner: String?
    /// The uid of the user who added the job (timerd's own for config jobs); it runs as that user unless
    /// `user=` says otherwise.
    public var owner_uid: UInt32
    /// True when the job belongs to another user: its action, environment, meta, output and reasons are
    /// left out (`docs/security.md`).
    public var redacted: Bool
    public var tags: [String]
    /// The modes the job fires in (`common`: all).
    public var modes: [String]
    /// Since when a fire has been held because the daemon is in a mode the job does not run in.
    public var held_since: String?
    /// Why timerd paused the job itself (`pause_after_failures`); null when it is not paused, or was paused
    /// by a request.
    public var paused_reason: String?
    /// Cluster mode: whether the job is shared by the cluster's nodes (`docs/cluster.md`).
    public var cluster: Bool = false
    /// Cluster mode: the node that runs the job (a shared job's: its owner, null while no live member can
    /// run it); null outside cluster mode.
    public var node: String?
    /// Cluster mode: why no node runs the shared job now (its state is then `waiting`).
    public var waiting_reason: String?
    /// The tags a node must carry, every one, to run the shared job (`run_on=`); empty: any node.
    public var run_on: [String] = []

    public struct SkippedFire: Codable, Equatable, Sendable {
        public var at: String
        public var reason: String
        public init(at: String, reason: String) {
            self.at = at
            self.reason = reason
        }
    }

    public init(name: String, state: State, source: String, schedule: String) {
        self.name = name
        self.state = state
        self.source = source
        self.schedule = schedule
        self.options = []
        self.runs = 0
        self.running = 0
        self.skipped = 0
        self.pending = 0
        self.tags = []
        self.modes = []
        self.owner_uid = 0
        self.redacted = false
    }

    // Encode every field, nulls included, so scripts can rely on the keys being present.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(state, forKey: .state)
        try c.encode(source, forKey: .source)
        try c.encode(declared_at, forKey: .declared_at)
        try c.encode(schedule, forKey: .schedule)
        try c.encode(options, forKey: .options)
        try c.encode(next_fire, forKey: .next_fire)
        try c.encode(timezone, forKey: .timezone)
        try c.encode(next_fire_local, forKey: .next_fire_local)
        try c.encode(dst_rules, forKey: .dst_rules)
        try c.encode(runs, forKey: .runs)
        try c.encode(running, forKey: .running)
        try c.encode(skipped, forKey: .skipped)
        try c.encode(pending, forKey: .pending)
        try c.encode(last_run, forKey: .last_run)
        try c.encode(last_started, forKey: .last_started)
        try c.encode(last_finished, forKey: .last_finished)
        try c.encode(last_result, forKey: .last_result)
        try c.encode(last_exit_code, forKey: .last_exit_code)
        try c.encode(last_signal, forKey: .last_signal)
        try c.encode(last_http_status, forKey: .last_http_status)
        try c.encode(last_duration_ms, forKey: .last_duration_ms)
        try c.encode(last_cpu_usage_ms, forKey: .last_cpu_usage_ms)
        try c.encode(last_memory_peak_bytes, forKey: .last_memory_peak_bytes)
        try c.encode(last_io_read_bytes, forKey: .last_io_read_bytes)
        try c.encode(last_io_write_bytes, forKey: .last_io_write_bytes)
        try c.encode(last_lateness_ms, forKey: .last_lateness_ms)
        try c.encode(last_reason, forKey: .last_reason)
        try c.encode(last_output, forKey: .last_output)
        try c.encode(last_skip, forKey: .last_skip)
        try c.encode(owner, forKey: .owner)
        try c.encode(owner_uid, forKey: .owner_uid)
        try c.encode(redacted, forKey: .redacted)
        try c.encode(tags, forKey: .tags)
        try c.encode(modes, forKey: .modes)
        try c.encode(held_since, forKey: .held_since)
        try c.encode(paused_reason, forKey: .paused_reason)
        try c.encode(cluster, forKey: .cluster)
        try c.encode(node, forKey: .node)
        try c.encode(waiting_reason, forKey: .waiting_reason)
        try c.encode(run_on, forKey: .run_on)
        try c.encodeIfPresent(recent_runs, forKey: .recent_runs)
    }

    /// Appends the object `Payload.encode` writes for it, byte for byte, without an encoder: a `LIST` of
    /// 100,000 jobs took seconds in `JSONEncoder` (checked against it in `JobInfoJSONTests`). Keys in
    /// `Payload`'s sorted order; `recent_runs` (`SHOW` only) goes through the encoder.
    public func appendJSON(to json: inout JSONBytes) {
        guard recent_runs == nil else {
            json.appendEncoded(self)
            return
        }
        json.raw("{\"cluster\":")
        json.bool(cluster)
        json.raw(",\"declared_at\":")
        json.string(declared_at)
        json.raw(",\"dst_rules\":")
        json.string(dst_rules)
        json.raw(",\"held_since\":")
        json.string(held_since)
        json.raw(",\"last_cpu_usage_ms\":")
        json.number(last_cpu_usage_ms)
        json.raw(",\"last_duration_ms\":")
        json.number(last_duration_ms)
        json.raw(",\"last_exit_code\":")
        json.integer(last_exit_code)
        json.raw(",\"last_finished\":")
        json.string(last_finished)
        json.raw(",\"last_http_status\":")
        json.integer(last_http_status)
        json.raw(",\"last_io_read_bytes\":")
        json.integer(last_io_read_bytes)
        json.raw(",\"last_io_write_bytes\":")
        json.integer(last_io_write_bytes)
        json.raw(",\"last_lateness_ms\":")
        json.number(last_lateness_ms)
        json.raw(",\"last_memory_peak_bytes\":")
        json.integer(last_memory_peak_bytes)
        json.raw(",\"last_output\":")
        json.string(last_output)
        json.raw(",\"last_reason\":")
        json.string(last_reason)
        json.raw(",\"last_result\":")
        json.string(last_result?.rawValue)
        json.raw(",\"last_run\":")
        json.integer(last_run)
        json.raw(",\"last_signal\":")
        json.integer(last_signal)
        json.raw(",\"last_skip\":")
        if let last_skip {
            json.raw("{\"at\":")
            json.string(last_skip.at)
            json.raw(",\"reason\":")
            json.string(last_skip.reason)
            json.raw("}")
        } else {
            json.null()
        }
        json.raw(",\"last_started\":")
        json.string(last_started)
        json.raw(",\"modes\":")
        json.strings(modes)
        json.raw(",\"name\":")
        json.string(name)
        json.raw(",\"next_fire\":")
        json.string(next_fire)
        json.raw(",\"next_fire_local\":")
        json.string(next_fire_local)
        json.raw(",\"node\":")
        json.string(node)
        json.raw(",\"options\":")
        json.strings(options)
        json.raw(",\"owner\":")
        json.string(owner)
        json.raw(",\"owner_uid\":")
        json.integer(owner_uid)
        json.raw(",\"paused_reason\":")
        json.string(paused_reason)
        json.raw(",\"pending\":")
        json.integer(pending)
        json.raw(",\"redacted\":")
        json.bool(redacted)
        json.raw(",\"run_on\":")
        json.strings(run_on)
        json.raw(",\"running\":")
        json.integer(running)
        json.raw(",\"runs\":")
        json.integer(runs)
        json.raw(",\"schedule\":")
        json.string(schedule)
        json.raw(",\"skipped\":")
        json.integer(skipped)
        json.raw(",\"source\":")
        json.string(source)
        json.raw(",\"state\":")
        json.string(state.rawValue)
        json.raw(",\"tags\":")
        json.strings(tags)
        json.raw(",\"timezone\":")
        json.string(timezone)
        json.raw(",\"waiting_reason\":")
        json.string(waiting_reason)
        json.raw("}")
    }
}

/// The `VERSION` reply.
public struct VersionInfo: Codable, Equatable, Sendable {
    public var version: String
    public var `protocol`: Int
    public init(version: String, protocol: Int) {
        self.version = version
        self.protocol = `protocol`
    }
}

/// The `MODE` reply: the current mode, and the fires it holds (or, after a switch, what it released).
public struct ModeInfo: Codable, Equatable, Sendable {
    public struct Held: Codable, Equatable, Sendable {
        public var name: String
        public var since: String
        public init(name: String, since: String) {
            self.name = name
            self.since = since
        }
    }

    public var mode: String
    public var previous: String?
    public var held: [Held]
    public var released: [String]?

    public init(mode: String, previous: String? = nil, held: [Held], released: [String]? = nil) {
        self.mode = mode
        self.previous = previous
        self.held = held
        self.released = released
    }
}

/// The reply to `PAUSE`/`RESUME`/`CANCEL` with `tag=`: the jobs it acted on.
public struct TagResult: Codable, Equatable, Sendable {
    public var jobs: [String]
    public init(jobs: [String]) { self.jobs = jobs }

    /// What `Payload.encode` writes for it, without an encoder (a tag may name 100,000 jobs).
    public var json: String {
        var json = JSONBytes()
        json.raw("{\"jobs\":")
        json.strings(jobs)
        json.raw("}")
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

/// The `STATS` reply: counters an operator needs (see `docs/protocol.md`).
public struct DaemonStats: Codable, Equatable, Sendable {
    public struct JobCounts: Codable, Equatable, Sendable {
        /// `waiting`: cluster mode, shared jobs no live member can take (`state: waiting` in `LIST`).
        public var scheduled = 0, paused = 0, finished = 0, waiting = 0
        public init() {}

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            scheduled = try c.decode(Int.self, forKey: .scheduled)
            paused = try c.decode(Int.self, forKey: .paused)
            finished = try c.decode(Int.self, forKey: .finished)
            // Absent from daemons before it.
            waiting = try c.decodeIfPresent(Int.self, forKey: .waiting) ?? 0
        }
    }

    public struct RunCounts: Codable, Equatable, Sendable {
        public var ok = 0, failed = 0, timeout = 0, killed = 0
        public init() {}
    }

    /// Percentiles in milliseconds over the last `window_seconds` (null without samples).
    public struct Percentiles: Codable, Equatable, Sendable {
        public var window_seconds: Double
        public var samples: Int
        public var p50: Double?
        public var p90: Double?
        public var p99: Double?
        public var max: Double?

        public init(window_seconds: Double, samples: Int, p50: Double?, p90: Double?, p99: Double?, max: Double?) {
            self.window_seconds = window_seconds
            self.samples = samples
            self.p50 = p50
            self.p90 = p90
            self.p99 = p99
            self.max = max
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(window_seconds, forKey: .window_seconds)
            try c.encode(samples, forKey: .samples)
            try c.encode(p50, forKey: .p50)
            try c.encode(p90, forKey: .p90)
            try c.encode(p99, forKey: .p99)
            try c.encode(max, forKey: .max)
        }
    }

    public var jobs: JobCounts
    public var runs: RunCounts
    public var running: Int
    public var pending: Int
    public var skipped: Int
    /// Scheduled fire to timer handler (how late timerd noticed the fire).
    public var lateness_ms: Percentiles
    /// Start of a run to its process running (spawn cost), for commands.
    public var exec_ms: Percentiles
    public var requests: Int
    public var rss_bytes: UInt64
    public var uptime_seconds: Double
    public var mode: String
    public var version: String
    /// The state directory's health (absent when timerd keeps no state).
    public var storage: Storage?
    /// How runs are kept together and stopped (absent from a daemon that does not say).
    public var run_tracking: RunTracking?
    /// Connections following events (`WATCH`) now (absent from a daemon that does not say).
    public var watchers: Int?

    /// Each run in a cgroup of its own, or in a process group only (`docs/architecture.md`, "Runs").
    public struct RunTracking: Codable, Equatable, Sendable {
        /// `cgroup` or `process-group`.
        public var by: String
        /// With `cgroup`: the directory the runs' cgroups are made in.
        public var cgroups: String?
        /// With `process-group`: why not by cgroup.
        public var reason: String?
        /// With `cgroup`: the controllers each run's cgroup has (`cpu`, `io`, `memory`, `pids`), which its
        /// limits need (`memory_max`: `memory`, …).
        public var controllers: [String]?

        public init(by: String, cgroups: String? = nil, reason: String? = nil, controllers: [String]? = nil) {
            self.by = by
            self.cgroups = cgroups
            self.reason = reason
            self.controllers = controllers
        }
    }

    /// Whether the state store can write, and what it could not (`docs/state.md`).
    public struct Storage: Codable, Equatable, Sendable {
        /// `ok` or `failing`.
        public var state: String
        /// While failing: since when (RFC 3339) and why.
        public var since: String?
        public var reason: String?
        /// Transactions that failed since start.
        public var write_errors: Int
        /// Background changes held until the store can write again.
        public var held: Int
        /// Background changes given up since start (more were held than the limit).
        public var lost: Int

        public init(state: String, since: String? = nil, reason: String? = nil, write_errors: Int, held: Int, lost: Int) {
            self.state = state
            self.since = since
            self.reason = reason
            self.write_errors = write_errors
            self.held = held
            self.lost = lost
        }
    }

    public init(
        jobs: JobCounts, runs: RunCounts, running: Int, pending: Int, skipped: Int, lateness_ms: Percentiles,
        exec_ms: Percentiles, requests: Int, rss_bytes: UInt64, uptime_seconds: Double, mode: String, version: String,
        storage: Storage? = nil, run_tracking: RunTracking? = nil, watchers: Int? = nil
    ) {
        self.watchers = watchers
        self.storage = storage
        self.run_tracking = run_tracking
        self.jobs = jobs
        self.runs = runs
        self.running = running
        self.pending = pending
        self.skipped = skipped
        self.lateness_ms = lateness_ms
        self.exec_ms = exec_ms
        self.requests = requests
        self.rss_bytes = rss_bytes
        self.uptime_seconds = uptime_seconds
        self.mode = mode
        self.version = version
    }
}

/// One event on a `WATCH` stream (keys sorted; absent when not applicable).
public struct WatchEvent: Codable, Equatable, Sendable {
    public var at: String
    public var event: String
    public var job: String?
    public var run: Int?
    public var scheduled_at: String?
    public var result: String?
    public var exit_code: Int?
    /// On `finished` of a webhook run: the last attempt's HTTP status.
    public var http_status: Int?
    public var reason: String?
    /// On `fired`: scheduled time to timer handler, the sample `STATS` summarises.
    public var lateness_ms: Double?
    /// On `finished` of a command's run: what it used, where known (`RunRecord`'s fields of these names).
    public var cpu_usage_ms: Double?
    public var memory_peak_bytes: Int?
    public var io_read_bytes: Int?
    public var io_write_bytes: Int?

    public init(at: String, event: String, job: String? = nil, run: Int? = nil, scheduled_at: String? = nil,
                result: String? = nil, exit_code: Int? = nil, http_status: Int? = nil, reason: String? = nil,
                lateness_ms: Double? = nil, cpu_usage_ms: Double? = nil, memory_peak_bytes: Int? = nil,
                io_read_bytes: Int? = nil, io_write_bytes: Int? = nil) {
        self.cpu_usage_ms = cpu_usage_ms
        self.memory_peak_bytes = memory_peak_bytes
        self.io_read_bytes = io_read_bytes
        self.io_write_bytes = io_write_bytes
        self.at = at
        self.event = event
        self.job = job
        self.run = run
        self.scheduled_at = scheduled_at
        self.result = result
        self.exit_code = exit_code
        self.http_status = http_status
        self.reason = reason
        self.lateness_ms = lateness_ms
    }

    /// What `Payload.encode(self)` writes, written directly: the daemon sends several events per run to
    /// each watcher, and the encoder was most of a `WATCH`'s cost.
    public var json: String {
        var writer = JSONObjectWriter()
        writer.string("at", at)
        writer.number("cpu_usage_ms", cpu_usage_ms)
        writer.string("event", event)
        writer.integer("exit_code", exit_code)
        writer.integer("http_status", http_status)
        writer.integer("io_read_bytes", io_read_bytes)
        writer.integer("io_write_bytes", io_write_bytes)
        writer.string("job", job)
        writer.number("lateness_ms", lateness_ms)
        writer.integer("memory_peak_bytes", memory_peak_bytes)
        writer.string("reason", reason)
        writer.string("result", result)
        writer.integer("run", run)
        writer.string("scheduled_at", scheduled_at)
        return writer.finish()
    }
}

/// The JSON codec of timerd: reply payloads (one line, UTF-8), the values the cluster keeps in etcd, and
/// etcd's gateway requests and replies (`EtcdWire`). FoundationEssentials' `JSONEncoder`/`JSONDecoder`.
public enum Payload {
    public static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        // Encoding our own plain structs cannot fail; a failure is a bug.
        guard let data = try? encoder.encode(value) else { preconditionFailure("cannot encode \(T.self)") }
        return String(decoding: data, as: UTF8.self)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try JSONDecoder().decode(type, from: Data(text.utf8))
    }

    /// The same for JSON as received (UTF-8 bytes).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// Writes one flat JSON object a key at a time, byte for byte as `Payload.encode` would write it
/// (keys in the order given, which callers keep sorted; strings escaped the same way). For output of a
/// million lines (`timerctl simulate --json`), where an encoder per line is most of the run time.
public struct JSONObjectWriter {
    private var json = JSONBytes()
    private var first = true

    public init() {
        json.raw("{")
    }

    public mutating func string(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        json.string(value)
    }

    public mutating func null(_ key: String) {
        self.key(key)
        json.null()
    }

    public mutating func integer(_ key: String, _ value: Int?) {
        guard let value else { return }
        self.key(key)
        json.integer(value)
    }

    public mutating func number(_ key: String, _ value: Double?) {
        guard let value else { return }
        self.key(key)
        json.number(value)
    }

    /// Closes the object and returns its text.
    public mutating func finish() -> String {
        json.raw("}")
        return String(decoding: json.bytes, as: UTF8.self)
    }

    private mutating func key(_ key: String) {
        if !first { json.raw(",") }
        first = false
        json.string(key)
        json.raw(":")
    }
}

/// `NEXT`'s reply: fire times as RFC 3339 local times with their UTC offset, in `timezone`.
public struct NextTimes: Codable, Equatable, Sendable {
    public var timezone: String
    public var times: [String]

    public init(timezone: String, times: [String]) {
        self.timezone = timezone
        self.times = times
    }
}

/// One due fire and what became of it (`WHY`): `ran` (with its run, how late it started, and its
/// result once the run ended), or `skipped`, `missed`, `held`, `queued`, `waiting` with the reason.
/// Absent values are left out.
public struct DueFire: Codable, Equatable, Sendable {
    public var scheduled: String
    public var outcome: String
    public var run: Int?
    public var lateness_ms: Double?
    public var result: String?
    /// Why it did not run (or waits); left out for another user's job.
    public var reason: String?

    public init(scheduled: String, outcome: String, run: Int? = nil, lateness_ms: Double? = nil, result: String? = nil,
                reason: String? = nil) {
        self.scheduled = scheduled
        self.outcome = outcome
        self.run = run
        self.lateness_ms = lateness_ms
        self.result = result
        self.reason = reason
    }
}

/// One finished run from the state store (`HISTORY`, and `recent_runs` in `SHOW`). Every key is present.
public struct RunRecord: Codable, Equatable, Sendable {
    public var run: Int
    public var scheduled_at: String?
    public var started_at: String
    public var ended_at: String
    public var result: String
    public var exit_code: Int?
    public var http_status: Int?
    public var lateness_ms: Double?
    /// The run's output tail; null when the job belongs to another user.
    public var output: String?
    /// The cluster node that ran it; null outside cluster mode.
    public var node: String?
    /// What it used (null where unknown), as `JobInfo`'s `last_cpu_usage_ms` and the rest.
    public var cpu_usage_ms: Double?
    public var memory_peak_bytes: Int64?
    public var io_read_bytes: Int64?
    public var io_write_bytes: Int64?
    /// Which attempt at its fire the run was (1: the first; more: `retries`).
    public var attempt: Int = 1
    /// What a run by hand added to its job (`RUN … env=… -- ARG…`); null for every other run.
    public var parameters: RunParameters?

    public init(run: Int, scheduled_at: String?, started_at: String, ended_at: String, result: String,
                exit_code: Int?, http_status: Int?, lateness_ms: Double?, output: String?, node: String? = nil,
                cpu_usage_ms: Double? = nil, memory_peak_bytes: Int64? = nil, io_read_bytes: Int64? = nil,
                io_write_bytes: Int64? = nil, attempt: Int = 1, parameters: RunParameters? = nil) {
        self.attempt = attempt
        self.parameters = parameters
        self.node = node
        self.cpu_usage_ms = cpu_usage_ms
        self.memory_peak_bytes = memory_peak_bytes
        self.io_read_bytes = io_read_bytes
        self.io_write_bytes = io_write_bytes
        self.run = run
        self.scheduled_at = scheduled_at
        self.started_at = started_at
        self.ended_at = ended_at
        self.result = result
        self.exit_code = exit_code
        self.http_status = http_status
        self.lateness_ms = lateness_ms
        self.output = output
    }

    enum CodingKeys: String, CodingKey {
        case run, scheduled_at, started_at, ended_at, result, exit_code, http_status, lateness_ms, output, node
        case cpu_usage_ms, memory_peak_bytes, io_read_bytes, io_write_bytes, attempt, parameters
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(run, forKey: .run)
        try c.encode(scheduled_at, forKey: .scheduled_at)
        try c.encode(started_at, forKey: .started_at)
        try c.encode(ended_at, forKey: .ended_at)
        try c.encode(result, forKey: .result)
        try c.encode(exit_code, forKey: .exit_code)
        try c.encode(http_status, forKey: .http_status)
        try c.encode(lateness_ms, forKey: .lateness_ms)
        try c.encode(output, forKey: .output)
        try c.encode(node, forKey: .node)
        try c.encode(cpu_usage_ms, forKey: .cpu_usage_ms)
        try c.encode(memory_peak_bytes, forKey: .memory_peak_bytes)
        try c.encode(io_read_bytes, forKey: .io_read_bytes)
        try c.encode(io_write_bytes, forKey: .io_write_bytes)
        try c.encode(attempt, forKey: .attempt)
        try c.encode(parameters, forKey: .parameters)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        run = try c.decode(Int.self, forKey: .run)
        scheduled_at = try c.decodeIfPresent(String.self, forKey: .scheduled_at)
        started_at = try c.decode(String.self, forKey: .started_at)
        ended_at = try c.decode(String.self, forKey: .ended_at)
        result = try c.decode(String.self, forKey: .result)
        exit_code = try c.decodeIfPresent(Int.self, forKey: .exit_code)
        http_status = try c.decodeIfPresent(Int.self, forKey: .http_status)
        lateness_ms = try c.decodeIfPresent(Double.self, forKey: .lateness_ms)
        output = try c.decodeIfPresent(String.self, forKey: .output)
        node = try c.decodeIfPresent(String.self, forKey: .node)
        cpu_usage_ms = try c.decodeIfPresent(Double.self, forKey: .cpu_usage_ms)
        memory_peak_bytes = try c.decodeIfPresent(Int64.self, forKey: .memory_peak_bytes)
        io_read_bytes = try c.decodeIfPresent(Int64.self, forKey: .io_read_bytes)
        io_write_bytes = try c.decodeIfPresent(Int64.self, forKey: .io_write_bytes)
        // A timerd before retries did not send it.
        attempt = try c.decodeIfPresent(Int.self, forKey: .attempt) ?? 1
        parameters = try c.decodeIfPresent(RunParameters.self, forKey: .parameters)
    }
}
