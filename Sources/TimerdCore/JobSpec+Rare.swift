/// The keys of a `JobSpec` that most jobs leave unset, kept out of line: nothing at all when every one
/// is unset, one shared immutable box otherwise (a change makes a new box). Inline they were about
/// 170 of a spec's 490 bytes, and the daemon keeps a spec for every job (`docs/architecture.md`,
/// "Memory per job").
struct RareKeys: Equatable, Sendable {
    struct Values: Equatable, Sendable {
        var timezone: String?
        var dstGap: DSTGap?
        var dstRepeat: DSTRepeat?
        var count: Int?
        var timeout: Duration?
        var env: [KeyValue] = []
        var meta: [KeyValue] = []
        var cwd: String?
        var user: String?
        var group: String?
        var owner: Owner?
        var onFailure: NotifyTarget?
        var onRecovery: NotifyTarget?
        var cluster: Bool?
        var runOn: [String] = []
        var killMode: KillMode?
        var resources: ResourceSettings?
        var successExitCodes: [Int]?
        var failOnStderr: Bool?
        var pauseAfterFailures: Int?
        var commandRetries: RetryPolicy?
        var pool: String?
        var logFile: LogFileSpec?
        var after: JobName?
        var afterResult: AfterResult?
    }

    private final class Box: Sendable {
        let values: Values
        init(_ values: Values) { self.values = values }
    }

    private var box: Box?

    init(_ values: Values) {
        box = values == Values() ? nil : Box(values)
    }

    private static let unset = Values()

    var values: Values { box?.values ?? Self.unset }

    /// One key: read straight from the box, set by a new box only when it changes. Reading through
    /// `values` copied all 26 keys to read one (even as `_read`), and a spec's keys are read one at a
    /// time, thirty of them to describe or store a job: a fifth of a pipelined `ADD`'s instructions
    /// (docs/performance.md, "ADD's parsing"); setting nil over nil made a new box each time.
    /// Inlined, so that each literal key path folds into a plain field access.
    subscript<Value: Equatable>(key: WritableKeyPath<Values, Value>) -> Value {
        @inline(__always) get { box?.values[keyPath: key] ?? Self.unset[keyPath: key] }
        @inline(__always) set {
            guard self[key] != newValue else { return }
            var values = values
            values[keyPath: key] = newValue
            self = RareKeys(values)
        }
    }

    static func == (lhs: RareKeys, rhs: RareKeys) -> Bool {
        lhs.box === rhs.box || lhs.values == rhs.values
    }
}

extension JobSpec {
    /// The IANA zone of a cron or calendar schedule (`timezone=`); nil means the system zone.
    public var timezone: String? {
        get { rare[\.timezone] }
        set { rare[\.timezone] = newValue }
    }

    /// Overrides of the DST rules for cron and calendar schedules (nil: the schedule kind's default).
    public var dstGap: DSTGap? {
        get { rare[\.dstGap] }
        set { rare[\.dstGap] = newValue }
    }

    public var dstRepeat: DSTRepeat? {
        get { rare[\.dstRepeat] }
        set { rare[\.dstRepeat] = newValue }
    }

    /// Stop after this many scheduled runs (`every` jobs only; one-shots run once).
    public var count: Int? {
        get { rare[\.count] }
        set { rare[\.count] = newValue }
    }

    /// What stopping a run signals (nil: `KillMode.controlGroup`).
    public var killMode: KillMode? {
        get { rare[\.killMode] }
        set { rare[\.killMode] = newValue }
    }

    /// What a command's run may use (`memory_max`, `nice`, `limit_nofile`, …); empty when none is set.
    public var resources: ResourceSettings {
        get { rare[\.resources] ?? ResourceSettings() }
        set { rare[\.resources] = newValue.isEmpty ? nil : newValue }
    }

    /// The exit statuses that mean success (`success_exit_codes`; nil: only 0). Commands only.
    public var successExitCodes: [Int]? {
        get { rare[\.successExitCodes] }
        set { rare[\.successExitCodes] = newValue }
    }

    /// Any output on stderr fails a run (`fail_on_stderr`; nil: no). Commands only.
    public var failOnStderr: Bool? {
        get { rare[\.failOnStderr] }
        set { rare[\.failOnStderr] = newValue }
    }

    /// A command job's retries (`retries`, `retry_backoff`): each attempt a run of its own. Nil for none, and
    /// for webhooks, which retry within one run (`Webhook.retries`).
    public var commandRetries: RetryPolicy? {
        get { rare[\.commandRetries] }
        set { rare[\.commandRetries] = newValue }
    }

    /// The pool whose slots its runs wait for (`pool=`, a `[pool "NAME"]` of the config), on top of the
    /// daemon's `max_running`; nil: none.
    public var pool: String? {
        get { rare[\.pool] }
        set { rare[\.pool] = newValue }
    }

    /// Where each run's output is appended (`log_file`, `log_max_size`, `log_keep`); nil: only timerd's log.
    public var logFile: LogFileSpec? {
        get { rare[\.logFile] }
        set { rare[\.logFile] = newValue }
    }

    /// The job whose runs' ends trigger this one (`after=`), in addition to its own schedule, if it has one.
    public var after: JobName? {
        get { rare[\.after] }
        set { rare[\.after] = newValue }
    }

    /// Which ends of the upstream's runs trigger it (`after_result`; nil: `success`).
    public var afterResult: AfterResult? {
        get { rare[\.afterResult] }
        set { rare[\.afterResult] = newValue }
    }

    /// Pause the job after this many failed runs in a row (`pause_after_failures`; nil: never).
    public var pauseAfterFailures: Int? {
        get { rare[\.pauseAfterFailures] }
        set { rare[\.pauseAfterFailures] = newValue }
    }

    /// Kill a run that takes longer than this (SIGTERM to its process group, SIGKILL after `killGrace`).
    public var timeout: Duration? {
        get { rare[\.timeout] }
        set { rare[\.timeout] = newValue }
    }

    /// Extra environment for the action, in order.
    public var env: [KeyValue] {
        get { rare[\.env] }
        set { rare[\.env] = newValue }
    }

    /// The job's user info, handed to the action as `TIMERD_META_<KEY>`.
    public var meta: [KeyValue] {
        get { rare[\.meta] }
        set { rare[\.meta] = newValue }
    }

    /// Working directory of the action (default `/`).
    public var cwd: String? {
        get { rare[\.cwd] }
        set { rare[\.cwd] = newValue }
    }

    /// The user the action runs as (`user=`; nil: the job's owner, see `docs/security.md`).
    public var user: String? {
        get { rare[\.user] }
        set { rare[\.user] = newValue }
    }

    /// The primary group the action runs with (`group=`; nil: the user's own).
    public var group: String? {
        get { rare[\.group] }
        set { rare[\.group] = newValue }
    }

    /// What the job's life is bound to: it is cancelled when its owner goes away (`owner=`).
    public var owner: Owner? {
        get { rare[\.owner] }
        set { rare[\.owner] = newValue }
    }

    /// Told when a run fails after a success (or as the first run), and when a run succeeds after a failure.
    public var onFailure: NotifyTarget? {
        get { rare[\.onFailure] }
        set { rare[\.onFailure] = newValue }
    }

    public var onRecovery: NotifyTarget? {
        get { rare[\.onRecovery] }
        set { rare[\.onRecovery] = newValue }
    }

    /// Whether the job is shared by a cluster of timerd nodes (`cluster=`; nil: the default of where it
    /// comes from: runtime jobs are shared in cluster mode, config jobs are not; `docs/cluster.md`).
    public var cluster: Bool? {
        get { rare[\.cluster] }
        set { rare[\.cluster] = newValue }
    }

    /// The node tags a shared job's node must carry, every one of them (`run_on=`; `[cluster] tags` in a
    /// node's timerd.conf); empty: any node (`docs/configuration.md`).
    public var runOn: [String] {
        get { rare[\.runOn] }
        set { rare[\.runOn] = newValue }
    }
}

/// `log_file=PATH` with `log_max_size` (default 10M) and `log_keep` (default 5): a job's runs' output in a
/// file of its own, rotated.
public struct LogFileSpec: Equatable, Sendable {
    public var path: String
    public var maxSize: Int
    public var keep: Int

    public static let defaultMaxSize = 10 << 20
    public static let defaultKeep = 5

    public init(path: String, maxSize: Int = defaultMaxSize, keep: Int = defaultKeep) {
        self.path = path
        self.maxSize = maxSize
        self.keep = keep
    }
}

/// Which runs of its upstream trigger a job that follows it (`after_result`).
public enum AfterResult: String, Sendable, Equatable {
    /// A run that ended `ok`.
    case success
    /// A run that did not.
    case failure
    /// Any run.
    case any

    /// Whether a run that ended `ok` (`succeeded`) or not triggers the job.
    public func matches(succeeded: Bool) -> Bool {
        switch self {
        case .success: succeeded
        case .failure: !succeeded
        case .any: true
        }
    }
}

