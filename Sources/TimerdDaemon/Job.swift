import Dispatch
import TimerdCore
import TimerdSystem

/// Where a job came from.
enum JobOrigin: Equatable, Sendable {
    case config(file: String, line: Int)
    case runtime

    var label: String {
        if case .runtime = self { return "runtime" }
        return "config"
    }
}

/// Why a fire happened: on schedule, or by hand (`RUN`, which does not count toward `count`).
enum FireKind: Sendable {
    case scheduled
    case manual
}

/// One fire that has been accepted but not started yet.
struct PendingFire: Sendable {
    var kind: FireKind
    /// Monotonic nanoseconds (`DispatchTime.uptimeNanoseconds`) when it was due.
    var scheduledMono: UInt64
    /// The same instant on the wall clock, for `TIMERD_SCHEDULED_AT` and display.
    var scheduledWall: WallTime
}

/// How a run ended.
struct RunOutcome: Sendable {
    enum Result: String, Sendable { case ok, failed, timeout, killed }
    var result: Result
    var exitCode: Int?
    var signal: Int?
    /// A webhook run's last HTTP status.
    var httpStatus: Int? = nil
    /// Human-readable cause, e.g. "exited with status 3" or "timed out after 5s; killed with SIGTERM".
    var reason: String
    var output: String
    var finishedWall: WallTime
    var durationNs: UInt64

    /// The journal's `TIMERD_EXIT_STATUS=`: the exit status, or the signal's name (`SIGKILL`), or `none`
    /// when the run never started.
    var exitStatusField: String {
        if let exitCode { return String(exitCode) }
        if let signal { return "\(Signal(rawValue: Int32(signal)))" }
        return "none"
    }
}

/// A run in progress, as the registry sees it.
struct ActiveRun: Sendable {
    var id: Int
    var handle: RunHandle?
    var startedMono: UInt64
    var startedWall: WallTime
    var kind: FireKind
    /// When the fire was due (for the history).
    var scheduledWall: WallTime
    var latenessNs: Int64
}

/// Everything the registry knows about one job. Lives only inside the registry (one owner).
struct Job {
    let id: UInt64
    var spec: JobSpec
    var origin: JobOrigin
    /// The uid of the user who added it (timerd's own for config jobs): only they and root may change it or
    /// see its details, and it runs as them unless root set `user=` (`docs/security.md`).
    let ownerUID: UInt32
    var state: JobStateValue = .scheduled
    /// Bumped whenever the timer is re-armed, so a stale timer event is recognised and ignored.
    var armGeneration: UInt64 = 0
    var timer: (any DispatchSourceTimer)?

    // Schedule position.
    var grid: FireGrid?
    var nextIndex: UInt64 = 0
    /// Monotonic deadline of the next fire (for `every` and `in`), or nil.
    var nextMono: UInt64?
    /// Wall-clock deadline of the next fire (for `at`, cron and calendar, jitter included), or nil.
    var nextWall: WallTime?
    /// A cron or calendar job's schedule, resolved in its time zone when the job was added. Boxed: a
    /// schedule with its zone is several hundred bytes, and most jobs have none (a `Job` is stored per
    /// job, so every byte here counts at 100,000 jobs).
    var civil: CivilSchedule? {
        get { civilBox?.schedule }
        set { civilBox = newValue.map(CivilBox.init) }
    }
    private var civilBox: CivilBox?
    /// The scheduled time (jitter not included) of a cron or calendar job's next fire.
    var nextNominal: WallTime?
    /// Where a cron or calendar schedule counts from: when it was armed, then each fire's scheduled time.
    /// After the clock is set back past it, counting restarts from the new now (as systemd does).
    var civilBase: WallTime?
    /// Scheduled fires accepted so far (checked against `count`).
    var acceptedFires = 0

    // Durable state (see Registry+State.swift).
    /// When the job was added (its `in=` delay counts from here).
    var addedWall = WallTime(nanosecondsSinceEpoch: 0)
    /// `every` jobs: the wall time of grid fire 0, stored so the phase survives restarts.
    var anchorWall: WallTime?
    /// The scheduled time of the last scheduled fire: missed fires are the schedule's times after it.
    var lastScheduledWall: WallTime?
    /// `misfire=all`: missed fires still to run, oldest first, each after the previous run ends.
    var replays: [WallTime] = []

    // Cluster mode (docs/cluster.md).
    /// Shared by the cluster: runs only on the leader, and only fires it wins in etcd.
    var shared = false
    /// etcd's revision of the record this job was last built from (later watch events only apply).
    var sharedRevision: Int64 = 0

    // Runs.
    var runs = 0
    var nextRunID = 1
    var active: [ActiveRun] = []
    /// The one fire queued behind a running one (`overlap=queue`, or `replace` waiting for the old run).
    var queued: PendingFire?
    var waitingForSlot = 0

    // What happened last.
    var lastStarted: (id: Int, at: WallTime, latenessNs: Int64)?
    var lastOutcome: (id: Int, outcome: RunOutcome)?
    /// When the last output was noted for `max_output_memory` (0: not held).
    var outputSequence: UInt64 = 0
    /// The last output was dropped for `max_output_memory` (`show` says so instead).
    var outputDropped = false
    var skipped = 0
    var lastSkip: (at: WallTime, reason: String)?

    // For metrics.
    var runsByResult: [RunOutcome.Result: Int] = [:]
    var lastSuccess: WallTime?

    // Owner and mode.
    /// The pidfd watch of an `owner=pid:N` job.
    var ownerWatch: IOWatcher.Registration?
    /// The control connection of an `owner=connection` job.
    var ownerConnection: Int?
    /// The one fire held while the daemon is in a mode the job does not run in.
    var heldFire: PendingFire?
    var heldSince: WallTime?

    /// Memory the last run's output takes (counted by `JobTable.outputBytes`).
    var heldOutputBytes: Int { lastOutcome?.outcome.output.utf8.count ?? 0 }

    init(id: UInt64, spec: JobSpec, origin: JobOrigin, ownerUID: UInt32 = Client.daemonUID) {
        self.id = id
        self.spec = spec
        self.origin = origin
        self.ownerUID = ownerUID
    }
}

/// Holds a `CivilSchedule` out of line (see `Job.civil`).
final class CivilBox: Sendable {
    let schedule: CivilSchedule
    init(_ schedule: CivilSchedule) { self.schedule = schedule }
}

enum JobStateValue: String, Sendable {
    case scheduled, paused, finished
}

/// The registry's jobs by name. A `Job` is several hundred bytes, and a dictionary keeps about a third of
/// its slots empty (more right after it grows): storing jobs inline would cost that much per empty slot
/// too. Each job lives in a box of its own instead, and the dictionary holds only pointers.
/// Reads and writes have the dictionary's value semantics: `jobs[name]!.state = .paused` changes the
/// stored job in place.
struct JobTable: Sequence {
    private final class Box {
        var job: Job?
        init(_ job: Job) { self.job = job }
    }

    private var boxes: [JobName: Box] = [:]
    /// Jobs per owner uid, kept here where every job comes and goes (for `user_max_jobs`).
    private(set) var countByOwner: [UInt32: Int] = [:]
    /// Bytes of every job's held last output (for `max_output_memory`).
    private(set) var outputBytes = 0

    subscript(name: JobName) -> Job? {
        get { boxes[name]?.job }
        _modify {
            if let box = boxes[name] {
                // Moved out while the caller changes it, so its arrays and strings stay uniquely referenced.
                var job = box.job.take()
                let owner = job!.ownerUID
                outputBytes -= job!.heldOutputBytes
                defer {
                    if let job {
                        outputBytes += job.heldOutputBytes
                        box.job = job
                        if job.ownerUID != owner {  // replaced by another user's job
                            uncount(owner)
                            countByOwner[job.ownerUID, default: 0] += 1
                        }
                    } else {
                        boxes[name] = nil
                        uncount(owner)
                    }
                }
                yield &job
            } else {
                var job: Job? = nil
                defer {
                    if let job {
                        boxes[name] = Box(job)
                        countByOwner[job.ownerUID, default: 0] += 1
                        outputBytes += job.heldOutputBytes
                    }
                }
                yield &job
            }
        }
    }

    private mutating func uncount(_ owner: UInt32) {
        countByOwner[owner, default: 1] -= 1
        if countByOwner[owner] == 0 { countByOwner[owner] = nil }
    }

    var count: Int { boxes.count }
    var isEmpty: Bool { boxes.isEmpty }
    var keys: some Collection<JobName> { boxes.keys }
    var values: some Sequence<Job> { boxes.values.lazy.map { $0.job! } }

    @discardableResult
    mutating func removeValue(forKey name: JobName) -> Job? {
        guard let job = boxes.removeValue(forKey: name)?.job else { return nil }
        uncount(job.ownerUID)
        outputBytes -= job.heldOutputBytes
        return job
    }

    func makeIterator() -> some IteratorProtocol<(key: JobName, value: Job)> {
        boxes.lazy.map { (key: $0.key, value: $0.value.job!) }.makeIterator()
    }
}
