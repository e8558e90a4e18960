import Dispatch
import TimerdCore
import TimerdEngine
import TimerdSystem
import TimerdProtocol

extension Registry {
    /// Every job (or those with `tag`), sorted by name. With many jobs this is long work, so it is done in
    /// slices: the names are sorted off the registry's queue and timers get their turn between slices
    /// (a job added or cancelled meanwhile may or may not be listed, as with any snapshot taken in steps).
    func list(tag: String? = nil, viewer: Client = .daemon) async -> [JobInfo] {
        let sorted: [JobName]
        if let tag {
            sorted = names(withTag: tag)
        } else {
            let all = Array(engine.jobs.keys)
            sorted = all.count <= Self.listSlice ? all.sorted() : await Self.sortedOffQueue(all)
        }
        var result: [JobInfo] = []
        result.reserveCapacity(sorted.count)
        for (index, name) in sorted.enumerated() {
            if index > 0, index % Self.listSlice == 0 { await Task.yield() }
            if let job = engine.job(name) { result.append(info(job, viewer: viewer)) }
        }
        return result
    }

    /// Jobs described per turn on the registry's queue by `list`.
    static let listSlice = 256

    /// Sorts on a queue of its own, so timers keep firing on the registry's while it sorts.
    private nonisolated static func sortedOffQueue(_ names: [JobName]) async -> [JobName] {
        await withCheckedContinuation { continuation in
            sortQueue.async { continuation.resume(returning: names.sorted()) }
        }
    }

    private static let sortQueue = DispatchQueue(label: "timerd.list-sort")

    func show(_ name: JobName, viewer: Client = .daemon) throws(TimerdError) -> JobInfo {
        info(try engine.lookup(name), viewer: viewer)
    }

    /// What `viewer` may see of `job`: everything for its owner and root; for other users the name,
    /// schedule, state and counts, without the action, environment, meta, working directory, hooks, output
    /// and reasons (`redacted`).
    private func info(_ job: EngineJob, viewer: Client) -> JobInfo {
        var info = fullInfo(job)
        guard !maySeeDetails(job, viewer) else { return info }
        info.redacted = true
        info.options = job.spec.options.filter { JobSpec.publicKeys.contains($0.key) }.map { "\($0.key)=\($0.value)" }
        info.last_output = nil
        info.last_reason = nil
        info.last_skip = info.last_skip.map { JobInfo.SkippedFire(at: $0.at, reason: "(hidden)") }
        info.declared_at = nil
        return info
    }

    private func fullInfo(_ job: EngineJob) -> JobInfo {
        var info = JobInfo(
            name: job.spec.name.rawValue, state: JobInfo.State(rawValue: job.state.rawValue)!,
            source: job.origin.label, schedule: job.spec.schedule.summary)
        if case .config(let file, let line) = job.origin { info.declared_at = "\(file):\(line)" }
        info.options = job.spec.options.map { "\($0.key)=\($0.value)" }
        if let next = engine.nextFire(job, at: clock.now()) { info.next_fire = RFC3339.format(next) }
        if let civil = job.civil {
            info.timezone = civil.zone.name
            info.dst_rules = civil.followsSystemd ? "systemd" : "dst_gap=\(civil.gap.rawValue) dst_repeat=\(civil.repeated.rawValue)"
            if job.state == .scheduled, job.nextMono == nil, let wall = job.nextWall {
                info.next_fire_local = RFC3339.format(wall, in: civil.zone)
            }
        }
        info.runs = job.runs
        info.running = job.active.count
        info.skipped = job.skipped
        info.pending = job.pending
        if let started = job.lastStarted {
            info.last_run = started.id
            info.last_started = RFC3339.format(started.at)
            info.last_lateness_ms = Double(started.lateness.nanoseconds) / 1_000_000
        }
        if let (_, outcome) = job.lastOutcome {
            info.last_finished = RFC3339.format(outcome.finishedWall)
            info.last_result = JobInfo.Result(rawValue: outcome.result.rawValue)
            info.last_exit_code = outcome.exitCode
            info.last_signal = outcome.signal
            info.last_http_status = outcome.httpStatus
            info.last_duration_ms = Double(outcome.duration.nanoseconds) / 1_000_000
            info.last_reason = outcome.reason
            info.last_output = outputs.output(of: job.spec.name, jobID: job.id) ?? ""
        }
        info.owner = job.spec.owner?.description
        info.owner_uid = job.ownerUID
        info.tags = job.spec.tags
        info.modes = job.spec.modes
        info.held_since = job.heldSince.map(RFC3339.format)
        info.cluster = job.shared
        info.node = runningNode(job)
        if let skip = job.lastSkip {
            info.last_skip = JobInfo.SkippedFire(at: RFC3339.format(skip.at), reason: skip.reason)
        }
        return info
    }
}
