import TimerdCore

/// A job added at run time, as stored.
public struct StoredJob: Equatable, Sendable {
    public var name: String
    /// `JobSpec.options`, canonical: enough to rebuild the spec.
    public var options: [KeyValue]
    public var paused: Bool
    /// Runs started so far (`TIMERD_RUN` continues from it).
    public var runs: Int
    public var addedAt: WallTime
    /// The scheduled time of the last scheduled fire (for missed-run policies).
    public var lastScheduled: WallTime?
    /// `every=` jobs: the wall time of the grid's fire 0, to keep the phase across restarts.
    public var anchor: WallTime?
    /// The uid of the user who added it; nil: timerd's own user.
    public var ownerUID: UInt32?
    /// A cluster job cached here (etcd holds the truth; docs/cluster.md).
    public var shared: Bool

    public init(
        name: String, options: [KeyValue], paused: Bool = false, runs: Int = 0, addedAt: WallTime,
        lastScheduled: WallTime? = nil, anchor: WallTime? = nil, ownerUID: UInt32? = nil, shared: Bool = false
    ) {
        self.ownerUID = ownerUID
        self.shared = shared
        self.name = name
        self.options = options
        self.paused = paused
        self.runs = runs
        self.addedAt = addedAt
        self.lastScheduled = lastScheduled
        self.anchor = anchor
    }
}

/// One finished run.
public struct StoredRun: Equatable, Sendable {
    public var job: String
    public var run: Int
    public var scheduledAt: WallTime?
    public var startedAt: WallTime
    public var endedAt: WallTime
    /// `ok`, `failed`, `timeout`, `killed`, `missed` or `skipped`.
    public var result: String
    public var exitCode: Int?
    public var httpStatus: Int?
    public var latenessMs: Double?
    /// The output's tail, as given (stored byte for byte, NUL bytes included).
    public var output: String
    /// The cluster node that ran it (nil: this daemon, outside cluster mode).
    public var node: String?
    /// What it used, each nil where unknown (schema version 6; nil for runs recorded before).
    public var cpuUsageMs: Double?
    public var memoryPeakBytes: Int?
    public var ioReadBytes: Int?
    public var ioWriteBytes: Int?
    /// Which attempt at its fire it was (schema version 7; 1 for runs recorded before).
    public var attempt: Int
    /// What a run by hand added to its job, as JSON (`RunParameters`; schema version 8), or nil.
    public var parameters: String?
    /// How it ended, in words (`exited with status 3`, `timed out after 5s; killed with SIGTERM`), and the
    /// signal that ended it (schema version 9; nil for runs recorded before).
    public var reason: String?
    public var signal: Int?

    public init(
        job: String, run: Int, scheduledAt: WallTime? = nil, startedAt: WallTime, endedAt: WallTime,
        result: String, exitCode: Int? = nil, httpStatus: Int? = nil, latenessMs: Double? = nil, output: String = "",
        node: String? = nil, cpuUsageMs: Double? = nil, memoryPeakBytes: Int? = nil, ioReadBytes: Int? = nil,
        ioWriteBytes: Int? = nil, attempt: Int = 1, parameters: String? = nil, reason: String? = nil, signal: Int? = nil
    ) {
        self.attempt = attempt
        self.parameters = parameters
        self.reason = reason
        self.signal = signal
        self.node = node
        self.cpuUsageMs = cpuUsageMs
        self.memoryPeakBytes = memoryPeakBytes
        self.ioReadBytes = ioReadBytes
        self.ioWriteBytes = ioWriteBytes
        self.job = job
        self.run = run
        self.scheduledAt = scheduledAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.result = result
        self.exitCode = exitCode
        self.httpStatus = httpStatus
        self.latenessMs = latenessMs
        self.output = output
    }
}

/// One due fire and what became of it (`timerctl why`).
public struct StoredFire: Equatable, Sendable {
    public var job: String
    /// Numbers the job's fires; with `job`, the record's identity while it is rewritten.
    public var sequence: UInt64
    public var scheduled: WallTime
    /// `ran`, `skipped`, `missed`, `held`, `queued` or `waiting`.
    public var outcome: String
    public var run: Int?
    public var latenessMs: Double?
    public var result: String?
    public var reason: String?

    public init(job: String, sequence: UInt64, scheduled: WallTime, outcome: String, run: Int? = nil, latenessMs: Double? = nil,
                result: String? = nil, reason: String? = nil) {
        self.job = job
        self.sequence = sequence
        self.scheduled = scheduled
        self.outcome = outcome
        self.run = run
        self.latenessMs = latenessMs
        self.result = result
        self.reason = reason
    }
}

/// One write to the store. Changes naming a job that is not stored (`setPaused`, `recordFire`) do nothing.
public enum StoreChange: Sendable, Equatable {
    /// Inserts the job or replaces the stored one of that name (its runs are kept).
    case putJob(StoredJob)
    /// Deletes the job and its runs.
    case deleteJob(String)
    case setPaused(String, Bool)
    /// Sets the job's run count and, unless nil (an unscheduled fire such as `RUN`), its last scheduled time.
    case recordFire(String, runs: Int, lastScheduled: WallTime?)
    /// Inserts the run, then prunes that job's runs to the newest `keep` (0 or less keeps none).
    case recordRun(StoredRun, keep: Int)
    /// Config jobs: only their last scheduled time, in a table of its own keyed by name; nil forgets it
    /// (the job left the config: if it comes back, its misfire policy does not count the time between).
    case recordConfigJobFire(String, lastScheduled: WallTime?)
    /// Inserts or replaces the fire record (same job and sequence), then prunes that job's records to the
    /// newest `keep`.
    case recordDueFire(StoredFire, keep: Int)
    /// A `CANCEL` of many jobs, durable in one row: the jobs named (in the order they will be deleted)
    /// are as good as deleted, for opening the file deletes those still there (`deleteCancelled`
    /// deletes them in steps). `id` is the caller's, unique among the rows left.
    case markCancelled(id: Int64, names: [String])
    /// The next of cancel `id`'s jobs deleted (their runs and due fires too), `done` of its names dealt
    /// with now; `finished` deletes its row (all are).
    case deleteCancelled(id: Int64, names: [String], done: Int, finished: Bool)
}

/// Whether the store can write (`timerctl stats`, `STATUS=`, the metrics file).
public enum StoreHealth: Sendable, Equatable {
    case ok
    /// Writes fail since `since` (the first failure of this episode); `reason` is the latest failure's,
    /// short and human ("disk full (SQLITE_FULL)", "/var/lib/timerd/state.db was removed").
    case failing(since: WallTime, reason: String)
}

/// A change of the store's health, reported once per transition (so a failing disk is logged once per
/// episode, not once per write).
public enum StoreHealthChange: Sendable, Equatable {
    /// The first failure of an episode, and why.
    case failing(since: WallTime, reason: String)
    /// Writes work again after `after`: `written` held changes were written then, `lost` were given up
    /// during the episode (the backlog's limit). `rebuilt`: the file had been removed or replaced, so a
    /// new one was started with the daemon's jobs (and config jobs' last fires) written again; the run
    /// history and `WHY` records from before are not in it.
    case recovered(after: Duration, written: Int, lost: Int, rebuilt: Bool)
}

/// The store's counters since the daemon started.
public struct StoreCounters: Sendable, Equatable {
    /// Transactions that failed as a whole (`timerd_state_write_errors_total`).
    public var writeErrors = 0
    /// Background changes held while writes fail, waiting to be written.
    public var backlog = 0
    /// Background changes given up: the oldest history beyond the backlog's limit, and what was still
    /// held (or came) when the store was closed.
    public var lost = 0
    /// Background changes SQLite refused for what they are (not a fault of the disk), dropped and reported
    /// through `StateStore.onDiagnostic`.
    public var dropped = 0
    /// Transactions committed.
    public var transactions = 0

    public init() {}
}
