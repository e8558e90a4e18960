import TimerdCore

/// Cluster mode (`docs/cluster.md`) as inputs and effects: the leader claims each shared fire
/// (`Effect.claim`) and runs it once the claim is won (`Input.claimDecided`); a change of role arrives
/// as `Input.leading` / `Input.notLeading`.
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

    /// A shared job's scheduled fire: claim it, then fire it (or not) when the claim is decided. The
    /// fire runs with the claimed instant as its scheduled time, the same whichever node runs it.
    mutating func claimThenFire(_ job: EngineJob, _ pending: PendingFire) -> String {
        let name = job.name
        guard settings.clusterNode != nil, clusterRole == .leader else {
            log(.debug, name, "fire at \(RFC3339.format(pending.scheduledWall)) not run here: this node does not lead the cluster")
            return "skipped"
        }
        var claimed = pending
        // A fire by its upstream's run: the instant that run ended, on the leader that saw it.
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

    /// This node now holds the leader key: arm every shared job from the last instant claimed in etcd,
    /// applying each job's misfire policy to what fell due while no node led.
    mutating func becomeLeader(claims: [JobName: WallTime]) {
        guard let node = settings.clusterNode else { return }
        let wasLeader = clusterRole == .leader
        clusterRole = .leader
        clusterLeader = node
        var count = 0
        for name in jobs.keys.sorted() {
            guard let job = jobs[name], job.shared else { continue }
            count += 1
            disarm(job)
            job.replays = []
            if let claimed = claims[name] {
                job.lastScheduledWall = claimed
                // A config job's grid is its own node's: go on from the previous leader's instead.
                if job.origin != .runtime, case .every = job.spec.schedule { job.anchorWall = claimed }
            } else if job.origin != .runtime {
                job.lastScheduledWall = nil
            }
            if job.state != .finished {
                catchUp(job, configJob: job.origin != .runtime, paused: job.state == .paused,
                        missedWhile: "while no node led the cluster")
            }
            if job.state == .scheduled { arm(job) }
            runMissed(job)
        }
        if !wasLeader { log(.notice, "cluster: this node (\(node)) now leads: it runs the \(count.counted("shared job"))") }
    }

    /// This node does not lead (any more): shared jobs stop here at once. Runs already going finish;
    /// fires not yet started are dropped (their instants may already be claimed: they are not run twice).
    mutating func notLeading(role: ClusterRole, leader: String?, reason: String) {
        let wasLeader = clusterRole == .leader
        clusterRole = role
        clusterLeader = leader
        guard wasLeader else { return }
        log(.warning, "cluster: this node no longer leads (\(reason)); it starts no shared job until it leads again")
        var dropped = 0
        for name in jobs.keys.sorted() {
            guard let job = jobs[name], job.shared else { continue }
            disarm(job)
            dropped += job.replays.count + job.pending
            job.replays = []
            job.queued = nil
            if job.waitingForSlot > 0 {
                waiting.removeAll { $0.jobID == job.id }
                job.waitingForSlot = 0
            }
        }
        if dropped > 0 { log(.warning, "cluster: \(dropped.counted("pending shared fire")) dropped with the leadership") }
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
        catchUp(job, configJob: false, paused: shared.paused, runMissed: clusterRole == .leader)
        if shared.paused, job.state == .scheduled { job.state = .paused }
        jobs[name] = job
        persistJob(job)
        log(.info, name, "added (cluster, on node \(shared.node)): \(job.spec.schedule.summary): \(job.spec.action.summary)")
        decide(.added(name, origin: "cluster"))
        if job.state == .scheduled { arm(job) }
        runMissed(job)
    }

    /// A run of a shared job that another node finished: into this node's history and `show`.
    mutating func noteRemoteRun(_ record: FinishedRun) {
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
    }
}
