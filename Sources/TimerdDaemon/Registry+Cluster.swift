import Dispatch
import TimerdCore
import TimerdProtocol
import TimerdStore
import TimerdSystem

/// What the registry needs from the cluster session (`ClusterNode`; a fake in unit tests).
protocol ClusterGate: AnyObject, Sendable {
    /// This node's name.
    var node: String { get }
    /// Tries to win the fire of `job` scheduled at `instant` in etcd; `done` is called once, on any queue.
    func claim(_ job: JobName, at instant: WallTime, done: @escaping @Sendable (ClaimOutcome) -> Void)
    /// Tells the other nodes about a finished run of a shared job (for their history and `show`).
    func publishRun(_ job: JobName, _ record: SharedRunRecord)
}

enum ClaimOutcome: Sendable, Equatable {
    case won
    case lost(String)
}

/// Where this node stands in the cluster.
enum ClusterRole: String, Sendable {
    /// Started, not yet connected to etcd.
    case connecting
    /// Holds the leader key: runs the shared jobs (each fire after winning its claim).
    case leader
    /// Connected; another node (or none, briefly) leads.
    case follower
    /// etcd cannot be reached or has no quorum: shared jobs neither run nor change here.
    case unavailable
}

/// Cluster mode (`docs/cluster.md`): shared jobs live in etcd and run on the leader only, each scheduled
/// fire after the leader won it with an etcd transaction. The `ClusterNode` keeps the session with etcd
/// and calls in here; the registry keeps every shared job (for `list`, `show`, `history` on any node) but
/// arms their timers only while it leads.
extension Registry {
    func setCluster(_ gate: any ClusterGate) {
        cluster = gate
    }

    /// Whether a job with `spec` from `origin` is shared: in cluster mode, jobs added at run time are
    /// unless `cluster=no`; config jobs only with `cluster=yes`; jobs bound to an owner never.
    func sharesJob(_ spec: JobSpec, origin: JobOrigin) -> Bool {
        guard cluster != nil, spec.owner == nil else { return false }
        return spec.cluster ?? (origin == .runtime)
    }

    /// The node that runs `job`: this one for its own jobs, the leader for shared ones; nil on a single host.
    func runningNode(_ job: Job) -> String? {
        guard let cluster else { return nil }
        return job.shared ? clusterLeader : cluster.node
    }

    /// The instant a shared fire is claimed under: the same on every node whatever the jitter or the
    /// conversion between clocks. `every` jobs: the grid time at or just before (50 ms of slack for the
    /// clock conversion); calendar jobs: the calendar time at or before; one-shots: their time.
    func claimInstant(_ job: Job, scheduledWall: WallTime) -> WallTime {
        switch job.spec.schedule {
        case .every(let interval, _):
            guard let anchor = job.anchorWall else { return scheduledWall }
            let period = max(1, interval.nanoseconds)
            let slack = min(period / 4, 50_000_000)
            let offset = (scheduledWall - anchor).nanoseconds + slack
            let index = offset >= 0 ? offset / period : -((-offset + period - 1) / period)
            return anchor + .nanoseconds(index * period)
        case .after(let delay):
            return job.origin == .runtime ? job.addedWall + delay : scheduledWall
        case .at(let time):
            return time
        case .cron, .calendar:
            guard let civil = job.civil else { return scheduledWall }
            let earliest = scheduledWall + (.zero - job.spec.jitter - .milliseconds(1))
            return civil.next(after: earliest).map { min($0, scheduledWall) } ?? scheduledWall
        }
    }

    /// A shared job's next fire as a node that does not lead sees it: its timer is not armed here, so
    /// the position it was given goes stale; the schedule's next time after now instead. Nil for jobs
    /// this node runs, and for one-shots (their time does not move).
    func followerNextFire(_ job: Job) -> WallTime? {
        guard job.shared, clusterRole != .leader else { return nil }
        let now = SystemClock.wallNow()
        switch job.spec.schedule {
        case .every(let interval, _):
            guard let anchor = job.anchorWall else { return nil }
            guard now >= anchor else { return anchor }
            let period = max(1, interval.nanoseconds)
            return anchor + .nanoseconds(((now - anchor).nanoseconds / period + 1) * period)
        case .cron, .calendar:
            return job.civil?.next(after: now)
        case .after, .at:
            return nil
        }
    }

    // MARK: - Claims

    /// A shared job's scheduled fire: claim it in etcd, then fire it (or not) when the claim is decided.
    func claimThenFire(_ name: JobName, _ pending: PendingFire) -> String {
        guard let cluster, clusterRole == .leader, let job = jobs[name] else {
            log.debug(job: name.rawValue, "fire at \(RFC3339.format(pending.scheduledWall)) not run here: this node does not lead the cluster")
            return "skipped"
        }
        let instant = claimInstant(job, scheduledWall: pending.scheduledWall)
        let jobID = job.id
        // The fire runs with the claimed instant as its scheduled time (TIMERD_SCHEDULED_AT), the same
        // whichever node runs it.
        var claimed = pending
        claimed.scheduledWall = instant
        cluster.claim(name, at: instant) { [unowned self, claimed] outcome in
            self.enqueue { $0.claimDecided(name, jobID: jobID, pending: claimed, outcome: outcome) }
        }
        return "claiming"
    }

    private func claimDecided(_ name: JobName, jobID: UInt64, pending: PendingFire, outcome: ClaimOutcome) {
        guard let job = jobs[name], job.id == jobID else { return }
        switch outcome {
        case .won:
            if let count = job.spec.count, job.acceptedFires >= count { return }
            fire(name, scheduledMono: pending.scheduledMono, scheduledWall: pending.scheduledWall, kind: .scheduled, claimed: true)
            persistFire(name)
        case .lost(let reason):
            log.notice(job: name.rawValue, "fire at \(RFC3339.format(pending.scheduledWall)) not run here: \(reason)")
        }
    }

    /// Publishes a finished run of a shared job for the other nodes' history.
    func publishRun(_ name: JobName, run: ActiveRun, outcome: RunOutcome) {
        guard let cluster else { return }
        let output = outcome.output.utf8.count <= SharedRunRecord.maxOutput
            ? outcome.output : String(decoding: outcome.output.utf8.suffix(SharedRunRecord.maxOutput), as: UTF8.self)
        cluster.publishRun(name, SharedRunRecord(
            node: cluster.node, run: run.id, scheduled_at: run.kind == .manual ? nil : run.scheduledWall.nanosecondsSinceEpoch,
            started_at: run.startedWall.nanosecondsSinceEpoch, ended_at: outcome.finishedWall.nanosecondsSinceEpoch,
            result: outcome.result.rawValue, exit_code: outcome.exitCode, http_status: outcome.httpStatus,
            lateness_ms: run.kind == .manual ? nil : Double(run.latenessNs) / 1_000_000, output: output))
    }

    /// A run of a shared job that another node finished: into this node's history and `show`.
    func noteRemoteRun(_ name: JobName, _ record: SharedRunRecord) {
        guard let cluster, record.node != cluster.node, var job = jobs[name], job.shared else { return }
        let started = WallTime(nanosecondsSinceEpoch: record.started_at)
        let ended = WallTime(nanosecondsSinceEpoch: record.ended_at)
        let result = RunOutcome.Result(rawValue: record.result) ?? .failed
        job.runs = max(job.runs, record.run)
        job.nextRunID = max(job.nextRunID, record.run + 1)
        job.lastStarted = (record.run, started, Int64((record.lateness_ms ?? 0) * 1_000_000))
        job.lastOutcome = (record.run, RunOutcome(
            result: result, exitCode: record.exit_code, signal: nil, httpStatus: record.http_status,
            reason: "\(record.exit_code.map { "exited with status \($0)" } ?? record.result) on node \(record.node)",
            output: record.output, finishedWall: ended, durationNs: UInt64(max(0, (ended - started).nanoseconds))))
        job.runsByResult[result, default: 0] += 1
        if let scheduled = record.scheduled_at {
            job.lastScheduledWall = max(job.lastScheduledWall ?? WallTime(nanosecondsSinceEpoch: scheduled), WallTime(nanosecondsSinceEpoch: scheduled))
        }
        jobs[name] = job
        noteOutputHeld(name)
        if job.spec.historyLimit > 0 {
            persist([.recordRun(StoredRun(
                job: name.rawValue, run: record.run, scheduledAt: record.scheduled_at.map { WallTime(nanosecondsSinceEpoch: $0) },
                startedAt: started, endedAt: ended, result: record.result, exitCode: record.exit_code,
                httpStatus: record.http_status, latenessMs: record.lateness_ms, output: record.output, node: record.node),
                keep: job.spec.historyLimit)])
        }
    }

    // MARK: - Leadership

    /// This node now holds the leader key: arm every shared job from the last instant claimed in etcd,
    /// applying each job's misfire policy to what fell due while no node led.
    func becomeLeader(claims: [String: WallTime]) {
        guard let cluster else { return }
        let wasLeader = clusterRole == .leader
        clusterRole = .leader
        clusterLeader = cluster.node
        let wallNow = SystemClock.wallNow()
        let monoNow = SystemClock.monoNow()
        var count = 0
        for name in jobs.keys.sorted() {
            guard var job = jobs[name], job.shared else { continue }
            count += 1
            disarm(&job)
            job.replays = []
            if let claimed = claims[name.rawValue] {
                job.lastScheduledWall = claimed
                // A config job's grid is its own node's: go on from the previous leader's instead.
                if job.origin != .runtime, case .every = job.spec.schedule { job.anchorWall = claimed }
            } else if job.origin != .runtime {
                job.lastScheduledWall = nil
            }
            if job.state != .finished {
                catchUp(&job, wallNow: wallNow, monoNow: monoNow, configJob: job.origin != .runtime,
                        paused: job.state == .paused, missedWhile: "while no node led the cluster")
            }
            jobs[name] = job
            if job.state == .scheduled { arm(name) }
            runMissed(name)
        }
        if !wasLeader { log.notice("cluster: this node (\(cluster.node)) now leads: it runs the \(count) shared job(s)") }
        noteStatusChange()
    }

    /// This node does not lead (any more): shared jobs stop here at once. Runs already going finish;
    /// fires not yet started are dropped (their instants may already be claimed: they are not run twice).
    func notLeading(role: ClusterRole, leader: String?, reason: String) {
        let wasLeader = clusterRole == .leader
        clusterRole = role
        clusterLeader = leader
        guard wasLeader else { return noteStatusChange() }
        log.warning("cluster: this node no longer leads (\(reason)); it starts no shared job until it leads again")
        var dropped = 0
        for name in jobs.keys.sorted() {
            guard var job = jobs[name], job.shared else { continue }
            disarm(&job)
            dropped += job.replays.count + (job.queued == nil ? 0 : 1) + job.waitingForSlot
            job.replays = []
            job.queued = nil
            if job.waitingForSlot > 0 {
                waiting.removeAll { $0.jobID == job.id }
                job.waitingForSlot = 0
            }
            jobs[name] = job
        }
        if dropped > 0 { log.warning("cluster: \(dropped) pending shared fire(s) dropped with the leadership") }
        noteStatusChange()
    }

    /// The leader changed (or became unknown) while this node follows.
    func setLeader(_ leader: String?) {
        guard clusterRole != .leader, clusterLeader != leader else { return }
        clusterLeader = leader
        noteStatusChange()
    }

    // MARK: - The shared job set (from etcd)

    /// Builds or updates a shared job from its etcd record (a watch event or the initial read). Records
    /// older than the one the job was built from are ignored.
    func applySharedJob(_ name: JobName, _ record: SharedJobRecord, revision: Int64) {
        let options = record.options.compactMap { $0.count == 2 ? KeyValue($0[0], $0[1]) : nil }
        if let existing = jobs[name] {
            guard existing.shared, existing.origin == .runtime else {
                log.error(job: name.rawValue, "the cluster has a shared job of this name, but this node has its own (\(existing.origin.label)); the shared one is not kept here")
                return
            }
            guard revision > existing.sharedRevision else { return }
            if existing.spec.options == options, existing.ownerUID == record.owner_uid,
               existing.addedWall.nanosecondsSinceEpoch == record.added_at {
                jobs[name]!.sharedRevision = revision
                if record.paused, existing.state == .scheduled {
                    try? pause([name])
                } else if !record.paused, existing.state == .paused {
                    try? resume([name], mode: .onSchedule)
                }
                return
            }
            remove(name, reason: "replaced by a newer definition in the cluster")
        }
        var job: Job
        do {
            job = try runtimeJob(name, options: options, ownerUID: record.owner_uid)
        } catch {
            log.error(job: name.rawValue, "cluster job not usable here: \(error.message)")
            return
        }
        job.shared = true
        job.sharedRevision = revision
        job.addedWall = WallTime(nanosecondsSinceEpoch: record.added_at)
        if case .every(let interval, let start) = job.spec.schedule { job.anchorWall = job.addedWall + (start ?? interval) }
        catchUp(&job, wallNow: SystemClock.wallNow(), monoNow: SystemClock.monoNow(), configJob: false,
                paused: record.paused, runMissed: clusterRole == .leader)
        if record.paused, job.state == .scheduled { job.state = .paused }
        jobs[name] = job
        persistJob(name)
        log.info(job: name.rawValue, "added (cluster, on node \(record.node)): \(job.spec.schedule.summary): \(job.spec.action.summary)")
        emit("added", job: name)
        if job.state == .scheduled { arm(name) }
        runMissed(name)
    }

    /// Shared jobs were cancelled (their etcd keys deleted) at `revision`: by a watch event, or by this
    /// node's own `CANCEL` (unless its watch got there first).
    func removeSharedJobs(_ names: [JobName], revision: Int64) {
        for name in names {
            guard let job = jobs[name], job.shared, job.origin == .runtime, revision > job.sharedRevision else { continue }
            remove(name, reason: "cancelled in the cluster")
        }
    }

    /// The whole shared job set as etcd has it (at connect, and after a watch had to start over): jobs
    /// etcd no longer has are removed.
    func syncSharedJobs(_ records: [(name: JobName, record: SharedJobRecord, revision: Int64)], mode: String?) {
        let names = Set(records.map(\.name))
        for (name, job) in jobs where job.shared && job.origin == .runtime && !names.contains(name) {
            remove(name, reason: "no longer in the cluster")
        }
        for item in records { applySharedJob(item.name, item.record, revision: item.revision) }
        if let mode { applyClusterMode(mode) }
    }

    /// Records the revision of a change this node made itself, so its own watch event is not applied twice.
    func noteSharedRevision(_ names: [JobName], revision: Int64) {
        for name in names where jobs[name]?.shared == true { jobs[name]!.sharedRevision = revision }
    }

    /// The cluster's mode changed (`MODE NAME` on some node).
    func applyClusterMode(_ mode: String) {
        guard mode != currentMode, (try? Mode.validName(mode, key: "mode", what: "mode")) != nil else { return }
        _ = switchMode(to: mode)
    }

    // MARK: - For shared writes

    /// The shared runtime jobs among `names` (the ones whose change goes through etcd).
    func sharedNames(_ names: [JobName]) -> [JobName] {
        names.filter { jobs[$0]?.shared == true && jobs[$0]?.origin == .runtime }
    }

    /// The shared jobs among `names` whose `paused` would change, with what etcd should hold for each
    /// (for `PAUSE`/`RESUME`; resuming a job that runs writes nothing).
    func sharedRecords(_ names: [JobName], paused: Bool) -> [(name: JobName, record: SharedJobRecord, revision: Int64)] {
        guard let cluster else { return [] }
        return sharedNames(names).compactMap { name in
            let job = jobs[name]!
            if (job.state == .paused) == paused || job.state == .finished { return nil }
            return (name, SharedJobRecord(
                options: job.spec.options.map { [$0.key, $0.value] }, paused: paused,
                added_at: job.addedWall.nanosecondsSinceEpoch, owner_uid: job.ownerUID, node: cluster.node), job.sharedRevision)
        }
    }

    /// Shared jobs this node knows of.
    func sharedJobCount() -> Int { jobs.values.reduce(0) { $0 + ($1.shared ? 1 : 0) } }
}
