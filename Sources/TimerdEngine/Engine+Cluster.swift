import TimerdCore

/// Cluster mode (`docs/cluster.md`) as inputs and effects: each shared job runs on one live member, its
/// owner (`Placement`); the owner claims each fire (`Effect.claim`) and runs it once the claim is won
/// (`Input.claimDecided`). Changes of this node's role or of the members arrive as `Input.clusterView`.
extension Engine {
    /// The instant a shared fire is claimed under: the same on every node whatever the jitter or the
    /// conversion between clocks. `every` jobs: the grid time at or just before (50 ms of slack for the
    /// clock conversion); calendar jobs: the calendar time at or before; one-shots: their time.
    package func claimInstant(_ job: EngineJob, scheduledWall: WallTime) -> WallTime {
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
        case .triggered:
            return scheduledWall
        }
    }

    /// The member of the cluster that runs the shared `job` as this node sees the cluster, or nil when no
    /// live member may (`run_on`, a config job no member declares) or this node is not in the cluster.
    package func owner(of job: EngineJob) -> String? {
        guard job.shared, clusterRole == .member else { return nil }
        return Placement.owner(of: job.name.rawValue, runOn: job.spec.runOn, configJob: job.origin != .runtime, among: clusterMembers)
    }

    /// Whether this node runs the shared `job` (arms it, claims its fires).
    package func runsHere(_ job: EngineJob) -> Bool {
        guard let node = settings.clusterNode else { return false }
        return owner(of: job) == node
    }

    /// A scheduled shared job that no node runs now (`state: waiting` in `LIST`, `jobs.waiting` in `STATS`).
    package func isWaiting(_ job: EngineJob) -> Bool {
        job.state == .scheduled && job.shared && owner(of: job) == nil
    }

    /// Why no node runs the shared `job` now, or nil when one does.
    package func whyNotPlaced(_ job: EngineJob) -> String? {
        guard job.shared else { return nil }
        switch clusterRole {
        case .connecting: return "this node is connecting to etcd"
        case .unavailable: return "etcd is unavailable to this node"
        case .member: break
        }
        guard owner(of: job) == nil else { return nil }
        if clusterMembers.isEmpty { return "no live member in the cluster" }
        let tags = job.spec.runOn
        let members = clusterMembers.map { "\($0.name)" + ($0.tags.isEmpty ? "" : " [\($0.tags.joined(separator: ", "))]") }
            .joined(separator: ", ")
        if job.origin != .runtime, !clusterMembers.contains(where: { $0.configJobs.contains(job.name.rawValue) }) {
            return "no live member declares this config job (cluster = yes)"
        }
        return "no live member has every tag of run_on=\(tags.joined(separator: ",")) (members: \(members))"
    }

    /// A shared job's scheduled fire: claim it, then fire it (or not) when the claim is decided. The
    /// fire runs with the claimed instant as its scheduled time, the same whichever node runs it.
    mutating func claimThenFire(_ job: EngineJob, _ pending: PendingFire) -> String {
        let name = job.name
        guard runsHere(job) else {
            let owner = owner(of: job)
            log(.debug, name, "fire at \(RFC3339.format(pending.scheduledWall)) not run here: \(owner.map { "node \($0) runs it" } ?? "no node runs it now")")
            return "skipped"
        }
        var claimed = pending
        // A fire by its upstream's run: the instant that run ended, on the node that saw it.
        if pending.trigger == nil { claimed.scheduledWall = claimInstant(job, scheduledWall: pending.scheduledWall) }
        let token = nextClaimToken
        nextClaimToken += 1
        claims[token] = claimed
        job.claiming += 1
        out.append(.claim(name, jobID: job.id, instant: claimed.scheduledWall, triggered: pending.trigger != nil, token: token))
        return "claiming"
    }

    mutating func claimDecided(_ name: JobName, jobID: UInt64, token: UInt64, won: Bool, reason: String) {
        guard let pending = claims.removeValue(forKey: token), let job = jobs[name], job.id == jobID else { return }
        job.claiming -= 1
        guard won else {
            log(.notice, name, "fire at \(RFC3339.format(pending.scheduledWall)) not run here: \(reason)")
            return
        }
        if let count = job.spec.count, job.acceptedFires >= count { return }
        fire(job, pending, claimed: true)
        persistFire(job)
    }

    /// The cluster as this node sees it changed (its role, or the live members): each shared job whose
    /// owner became this node is armed from the last instant claimed in etcd, with its misfire policy
    /// applied to what fell due while no node ran it; each whose owner is another node now (or none) stops
    /// here. Runs already going finish; fires not yet started are dropped (their instants may already be
    /// claimed: they are not run twice).
    mutating func applyClusterView(_ view: ClusterView) {
        guard let node = settings.clusterNode else { return }
        let wasMember = clusterRole == .member
        let before = Set(jobs.keys.filter { jobs[$0]!.shared && runsHere(jobs[$0]!) })
        clusterRole = view.role
        clusterMembers = view.members
        var gained = 0, gave = 0, dropped = 0, owned = 0
        for name in jobs.keys.sorted() {
            guard let job = jobs[name], job.shared else { continue }
            let mine = runsHere(job)
            if mine { owned += 1 }
            let was = before.contains(name)
            if mine, !was {
                gained += 1
                takeOver(job, claimed: view.claims[name])
            } else if !mine, was {
                gave += 1
                dropped += giveUp(job)
            }
        }
        if view.role == .member {
            let names = view.members.map(\.name).joined(separator: ", ")
            if !wasMember || gained > 0 || gave > 0 {
                let shared = sharedCount
                log(.notice, "cluster: \(view.members.count.counted("live member")) (\(names)); this node (\(node)) runs \(owned) of the "
                    + "\(shared.counted("shared job"))" + (gained + gave > 0 ? ": took over \(gained), gave up \(gave) (\(view.reason))" : ""))
            }
        } else if wasMember {
            log(.warning, "cluster: this node starts no shared job until it is back in the cluster (\(view.reason))")
        }
        if dropped > 0 { log(.warning, "cluster: \(dropped.counted("pending shared fire")) dropped with the jobs given up") }
    }

    /// Shared jobs this node knows of.
    var sharedCount: Int { jobs.keys.reduce(0) { $0 + (jobs[$1]!.shared ? 1 : 0) } }

    /// This node now runs `job`: it goes on from the last instant claimed in etcd, with its misfire
    /// policy applied to what fell due meanwhile.
    private mutating func takeOver(_ job: EngineJob, claimed: WallTime?) {
        disarm(job)
        job.replays = []
        if let claimed {
            job.lastScheduledWall = claimed
            // A config job's grid is its own node's: go on from the previous owner's instead.
            if job.origin != .runtime, case .every = job.spec.schedule { job.anchorWall = claimed }
        } else if job.origin != .runtime {
            job.lastScheduledWall = nil
        }
        if job.state != .finished {
            catchUp(job, configJob: job.origin != .runtime, paused: job.state == .paused,
                    missedWhile: "while no node of the cluster ran it")
        }
        if job.state == .scheduled { arm(job) }
        runMissed(job)
    }

    /// This node no longer runs `job`: its timer stops and its fires not yet started are dropped (how
    /// many is returned).
    private mutating func giveUp(_ job: EngineJob) -> Int {
        disarm(job)
        let dropped = job.replays.count + job.pending
        job.replays = []
        job.queued = nil
        if job.waitingForSlot > 0 {
            waiting.removeAll { $0.jobID == job.id }
            job.waitingForSlot = 0
        }
        return dropped
    }

    // MARK: - The shared job set

    /// Builds or updates a shared job from its etcd record. Records older than the one the job was
    /// built from are ignored.
    mutating func applySharedJob(_ shared: SharedJob) {
        let name = shared.spec.name
        if let existing = jobs[name] {
            guard existing.shared, existing.origin == .runtime else {
                log(.error, name, "the cluster has a shared job of this name, but this node has its own (\(existing.origin.label)); the shared one is not kept here")
                return
            }
            guard shared.revision > existing.sharedRevision else { return }
            if existing.spec.options == shared.spec.options, existing.ownerUID == shared.ownerUID, existing.addedWall == shared.addedAt {
                jobs[name]!.sharedRevision = shared.revision
                if shared.paused, existing.state == .scheduled {
                    pause([name])
                } else if !shared.paused, existing.state == .paused {
                    resume([name], mode: .onSchedule)
                }
                return
            }
            remove(name, reason: "replaced by a newer definition in the cluster")
        }
        let job = EngineJob(id: nextJobID, spec: shared.spec, origin: .runtime, ownerUID: shared.ownerUID)
        nextJobID += 1
        noteNameUsed(name)
        job.civil = shared.civil
        job.shared = true
        job.sharedRevision = shared.revision
        job.addedWall = shared.addedAt
        if case .every(let interval, let start) = job.spec.schedule { job.anchorWall = job.addedWall + (start ?? interval) }
        catchUp(job, configJob: false, paused: shared.paused, runMissed: runsHere(job))
        if shared.paused, job.state == .scheduled { job.state = .paused }
        jobs[name] = job
        persistJob(job)
        let placed = clusterRole != .member ? "" : owner(of: job).map { "; runs on node \($0)" } ?? "; waiting: \(whyNotPlaced(job) ?? "")"
        log(.info, name, "added (cluster, on node \(shared.node)): \(job.spec.schedule.summary): \(job.spec.action.summary)\(placed)")
        decide(.added(name, origin: "cluster"))
        if job.state == .scheduled { arm(job) }
        runMissed(job)
    }

    /// A run of a shared job that another node finished: into this node's history and `show`; the last
    /// attempt of its fire fires the jobs that follow it and run here.
    mutating func noteRemoteRun(_ record: FinishedRun, final: Bool) {
        guard let node = settings.clusterNode, let from = record.node, from != node, let job = jobs[record.job], job.shared else { return }
        var outcome = record.outcome
        outcome.reason = "\(outcome.exitCode.map { "exited with status \($0)" } ?? outcome.result.rawValue) on node \(from)"
        job.runs = max(job.runs, record.run)
        job.nextRunID = max(job.nextRunID, record.run + 1)
        job.lastStarted = (record.run, record.startedAt, record.lateness)
        var kept = outcome
        kept.output = ""
        job.lastOutcome = (record.run, kept)
        job.runsByResult[outcome.result] += 1
        if let scheduled = record.scheduledAt { job.lastScheduledWall = max(job.lastScheduledWall ?? scheduled, scheduled) }
        if job.spec.historyLimit > 0 { out.append(.persist(.run(record, keep: job.spec.historyLimit))) }
        if final { triggerFollowers(of: job, run: record.run, succeeded: outcome.result == .ok, endedAt: outcome.finishedWall) }
    }
}
