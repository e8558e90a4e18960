import TimerdCore
import TimerdEngine
import TimerdSystem
import TimerdProtocol

/// What `LIST` and `SHOW` say about a job, read on the registry's queue in one step (a job is never half
/// described): values as the engine has them. Turning them into text (`JobInfo`: times, options, the
/// schedule) is most of the work, and it is done off the registry's queue.
struct JobSnapshot: Sendable {
    var spec: JobSpec
    var state: JobState
    var origin: JobOrigin
    var nextFire: WallTime?
    var civil: CivilSchedule?
    /// A cron or calendar job's next fire, to show as local time.
    var nextFireLocal: WallTime?
    var runs: Int
    var running: Int
    var skipped: Int
    var pending: Int
    var lastStarted: (id: Int, at: WallTime, lateness: Duration?)?
    var lastOutcome: RunOutcome?
    /// The last run's output as held for `show` (nil when there is no last run).
    var lastOutput: String?
    var lastSkip: (at: WallTime, reason: String)?
    var ownerUID: UInt32
    var heldSince: WallTime?
    var pauseReason: String?
    var shared: Bool
    var node: String?
    /// Why no node of the cluster runs the shared job now.
    var waiting: String?
    /// The viewer is another user than the job's: only its public parts are shown.
    var redacted: Bool
}

extension JobInfo {
    /// What the viewer of `job` may see of it: everything for its owner and root; for other users the
    /// name, schedule, state and counts, without the action, environment, meta, working directory,
    /// hooks, output and reasons (`redacted`).
    init(_ job: JobSnapshot) {
        self.init(
            name: job.spec.name.rawValue, state: job.waiting != nil ? .waiting : JobInfo.State(rawValue: job.state.rawValue)!,
            source: job.origin.label,
            schedule: job.spec.schedule.summary)
        let options = job.redacted ? job.spec.options.filter { JobSpec.publicKeys.contains($0.key) } : job.spec.options
        self.options = options.map { "\($0.key)=\($0.value)" }
        if !job.redacted, case .config(let file, let line) = job.origin { declared_at = "\(file):\(line)" }
        next_fire = job.nextFire.map(RFC3339.format)
        if let civil = job.civil {
            timezone = civil.zone.name
            dst_rules = civil.followsSystemd ? "systemd" : "dst_gap=\(civil.gap.rawValue) dst_repeat=\(civil.repeated.rawValue)"
            next_fire_local = job.nextFireLocal.map { RFC3339.format($0, in: civil.zone) }
        }
        runs = job.runs
        running = job.running
        skipped = job.skipped
        pending = job.pending
        if let started = job.lastStarted {
            last_run = started.id
            last_started = RFC3339.format(started.at)
            last_lateness_ms = started.lateness.map { Double($0.nanoseconds) / 1_000_000 }
        }
        if let outcome = job.lastOutcome {
            last_finished = RFC3339.format(outcome.finishedWall)
            last_result = JobInfo.Result(rawValue: outcome.result.rawValue)
            last_exit_code = outcome.exitCode
            last_signal = outcome.signal
            last_http_status = outcome.httpStatus
            last_duration_ms = Double(outcome.duration.nanoseconds) / 1_000_000
            last_cpu_usage_ms = outcome.usage.cpuMilliseconds
            last_memory_peak_bytes = outcome.usage.memoryPeakBytes
            last_io_read_bytes = outcome.usage.ioReadBytes
            last_io_write_bytes = outcome.usage.ioWriteBytes
            if !job.redacted {
                last_reason = outcome.reason
                last_output = job.lastOutput ?? ""
            }
        }
        owner = job.spec.owner?.description
        owner_uid = job.ownerUID
        redacted = job.redacted
        tags = job.spec.tags
        modes = job.spec.modes
        held_since = job.heldSince.map(RFC3339.format)
        paused_reason = job.pauseReason
        cluster = job.shared
        node = job.node
        waiting_reason = job.waiting
        run_on = job.spec.runOn
        if let skip = job.lastSkip {
            last_skip = JobInfo.SkippedFire(at: RFC3339.format(skip.at), reason: job.redacted ? "(hidden)" : skip.reason)
        }
    }
}

extension Registry {
    /// Every job (or those with `tag`), sorted by name; see `JobList`.
    func list(tag: String? = nil, viewer: Client = .daemon) async -> [JobInfo] {
        await JobList.infos(self, tag: tag, viewer: viewer)
    }

    func show(_ name: JobName, viewer: Client = .daemon) throws(TimerdError) -> JobInfo {
        let job = try engine.lookup(name)
        // Its cancel is on disk and taking effect: it is gone.
        if engine.isCancelPending(job) { throw TimerdError(.noSuchJob, "no job named \(name)") }
        return JobInfo(snapshot(job, in: engine, viewer: viewer, now: clock.now()))
    }

    /// The names `LIST` shows, in no order: all, or those with `tag`.
    func listNames(tag: String?) -> [JobName] {
        guard let tag else { return Array(engine.jobs.keys) }
        return engine.jobNames(withTag: tag)
    }

    /// The jobs among `names` that still exist, as `viewer` may see them (one step of the queue).
    func snapshots(_ names: ArraySlice<JobName>, viewer: Client) -> [JobSnapshot] {
        let now = clock.now()
        return sliceStep(names) { engine, job in snapshot(job, in: engine, viewer: viewer, now: now) }
    }

    /// One step of a long read a slice of jobs at a time (`LIST`, the metrics): jobs due meanwhile fire
    /// first (the steps follow each other on the registry's queue with no break in which its loop would
    /// see a timer), then `read` gets each job among `names` that still exists (a job whose cancel is on
    /// disk and still taking effect is gone already), with the engine read once for the slice: a method
    /// called on the stored property copies the whole struct first (all its fields retained, then
    /// released), and a `LIST` took four such calls a job, a quarter of the registry's time in it
    /// (docs/performance.md, "LIST (round 14)").
    func sliceStep<T>(_ names: ArraySlice<JobName>, _ read: (borrowing Engine, EngineJob) -> T) -> [T] {
        deliverDue()
        let engine = self.engine
        return names.compactMap { name in
            engine.job(name).flatMap { engine.isCancelPending($0) ? nil : read(engine, $0) }
        }
    }

    private func snapshot(_ job: EngineJob, in engine: borrowing Engine, viewer: Client, now: Instant) -> JobSnapshot {
        let redacted = !maySeeDetails(job, viewer)
        let civil = job.civil
        return JobSnapshot(
            spec: job.spec, state: job.state, origin: job.origin, nextFire: engine.nextFire(job, at: now), civil: civil,
            nextFireLocal: civil != nil && job.state == .scheduled && job.nextMono == nil ? job.nextWall : nil,
            runs: job.runs, running: job.active.count, skipped: job.skipped, pending: job.pending, lastStarted: job.lastStarted,
            lastOutcome: job.lastOutcome?.outcome,
            lastOutput: job.lastOutcome == nil || redacted ? nil : outputs.output(of: job.spec.name, jobID: job.id),
            lastSkip: job.lastSkip, ownerUID: job.ownerUID, heldSince: job.heldSince, pauseReason: job.pauseReason,
            shared: job.shared, node: runningNode(job, in: engine), waiting: job.state == .scheduled ? engine.whyNotPlaced(job) : nil,
            redacted: redacted)
    }
}
