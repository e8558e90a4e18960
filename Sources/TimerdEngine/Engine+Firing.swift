import TimerdCore

/// What becomes of a fire: held for a mode, claimed in the cluster, limited by the owner's run rate,
/// decided by the overlap policy, parked for a run slot, started; and what happens when a run ends.
extension Engine {
    // MARK: - Fires

    /// Handles one fire of a job by its mode, overlap policy and the daemon's run cap. Returns what
    /// happened: `started`, `queued`, `waiting` (for a run slot), `held`, `claiming` or `skipped`.
    @discardableResult
    mutating func fire(_ job: EngineJob, _ pending: PendingFire, claimed: Bool = false, forced: Bool = false) -> String {
        let name = job.name
        // A retry goes on with a fire already accepted (held, claimed, counted): only the overlap policy
        // and the run slots apply to it.
        let first = pending.attempt == 1
        if first, pending.kind == .scheduled, !Mode.includes(job.spec.modes, currentMode) {
            return hold(job, pending)
        }
        // A shared job's scheduled fire runs only once this node has won it in etcd.
        if first, pending.kind == .scheduled, job.shared, !claimed {
            return claimThenFire(job, pending)
        }
        if first, pending.kind == .scheduled, !takeRunToken(ownerUID: job.ownerUID) {
            noteSkip(job, count: 1, scheduled: pending.scheduledWall, sequence: pending.sequence,
                     reason: "uid \(job.ownerUID)'s jobs started \(settings.userMaxRunsPerMinute.counted("run")) in the last minute (user_max_runs_per_minute)")
            return "skipped"
        }
        // A run by hand with force: alongside whatever runs, as `overlap=allow` would.
        let busy = !forced && (!job.active.isEmpty || job.waitingForSlot > 0)
        if busy {
            let holder = job.active.first.map { "run \($0.id) is still going" } ?? "the previous fire is still waiting for a run slot"
            switch job.spec.overlap {
            case .skip:
                noteSkip(job, count: 1, scheduled: pending.scheduledWall, sequence: pending.sequence, reason: "\(holder) (overlap=skip)")
                return "skipped"
            case .queue, .replace:
                if job.queued != nil {
                    noteSkip(job, count: 1, scheduled: pending.scheduledWall, sequence: pending.sequence,
                             reason: "\(holder) and a fire is already queued (overlap=\(job.spec.overlap))")
                    return "skipped"
                }
                job.queued = pending
                if first, pending.kind == .scheduled { job.acceptedFires += 1 }
                let replace = job.spec.overlap == .replace
                let reason = replace ? "\(holder); stopping it to start anew (overlap=replace)" : "\(holder); fire queued (overlap=queue)"
                log(.info, name, reason)
                noteWaiting(job, pending, outcome: .queued, reason: reason)
                if replace {
                    for run in job.active {
                        out.append(.stopRun(name, jobID: job.id, run: run.id, reason: "replaced by a new fire (overlap=replace)", kill: false))
                    }
                }
                return "queued"
            case .allow:
                break
            }
        }
        if first, pending.kind == .scheduled { job.acceptedFires += 1 }
        return startOrWait(job, pending)
    }

    /// Starts a run now, or parks it until a run slot frees up (`max_running`).
    mutating func startOrWait(_ job: EngineJob, _ pending: PendingFire) -> String {
        let name = job.name
        // Fires of its pool that wait already go first.
        let poolWaits = job.spec.pool.map { pool in waiting.contains { jobs[$0.name]?.spec.pool == pool } } ?? false
        guard runningTotal >= settings.maxRunning || poolIsFull(job) || poolWaits else {
            startRun(job, pending)
            return "started"
        }
        job.waitingForSlot += 1
        waiting.append((name, job.id, pending))
        let reason = runningTotal >= settings.maxRunning
            ? "fire waits for a run slot (max_running=\(settings.maxRunning): \(settings.maxRunning.counted("run")) already going)"
            : "fire waits for a slot of pool \(job.spec.pool!) (max_running=\(settings.pools[job.spec.pool!] ?? 0) of its runs already going)"
        log(.notice, name, reason)
        noteWaiting(job, pending, outcome: .waiting, reason: reason)
        return "waiting"
    }

    private mutating func startRun(_ job: EngineJob, _ pending: PendingFire) {
        let name = job.name
        let runID = job.nextRunID
        job.nextRunID += 1
        job.runs += 1
        let lateness = now.mono - pending.scheduled
        job.active.append(ActiveRun(
            id: runID, startedMono: now.mono, startedWall: now.wall, kind: pending.kind, scheduledWall: pending.scheduledWall,
            lateness: lateness, sequence: pending.sequence, attempt: pending.attempt, parameters: pending.parameters,
            trigger: pending.trigger))
        // A run by hand has no lateness (`show` agrees with its history): it was due when asked for.
        job.lastStarted = (runID, now.wall, pending.kind == .manual ? nil : lateness)
        runningTotal += 1
        if let pool = job.spec.pool, settings.pools[pool] != nil {
            runningByPool[pool, default: 0] += 1
            runPools[RunKey(jobID: job.id, run: runID)] = pool
        }
        out.append(.startRun(RunStart(
            job: name, jobID: job.id, run: runID, kind: pending.kind, scheduled: pending.scheduledWall, lateness: lateness,
            attempt: pending.attempt, parameters: pending.parameters, trigger: pending.trigger, specBox: job.specBox,
            ownerUID: job.ownerUID)))
        let late = lateness > .milliseconds(1) ? ", \(DurationText.format(.milliseconds(lateness.nanoseconds / 1_000_000))) late" : ""
        let attempt = pending.attempt > 1 ? ", attempt \(pending.attempt) of \((job.spec.commandRetries?.retries ?? 0) + 1)" : ""
        log(.info, name, run: runID,
            "starting (\(pending.kind == .manual ? "by hand" : "scheduled at \(RFC3339.format(pending.scheduledWall))")\(late)\(attempt))")
        decide(.started(name, run: runID, scheduled: pending.kind == .manual ? nil : pending.scheduledWall,
                        lateness: pending.kind == .manual ? nil : lateness))
        if pending.sequence != 0 {
            record(job, FireRecord(job: name, sequence: pending.sequence, scheduled: pending.scheduledWall, outcome: .ran,
                              run: runID, lateness: lateness))
        }
    }

    /// Holds a scheduled fire while the daemon is in a mode the job does not run in. A job holds at most
    /// one fire (a repeating job fires once when its mode returns, not a burst); later ones are skipped.
    mutating func hold(_ job: EngineJob, _ pending: PendingFire) -> String {
        let name = job.name
        guard job.heldFire == nil else {
            noteSkip(job, count: 1, scheduled: pending.scheduledWall, sequence: pending.sequence,
                     reason: "held: the daemon is in mode \(currentMode) and one fire is already held")
            return "skipped"
        }
        job.heldFire = pending
        job.heldSince = now.wall
        job.acceptedFires += 1
        let reason = "fire held: the daemon is in mode \(currentMode); the job runs in \(job.spec.modes.joined(separator: ","))"
        log(.info, name, reason)
        decide(.held(name, scheduled: pending.scheduledWall, reason: reason))
        if pending.sequence != 0 {
            record(job, FireRecord(job: name, sequence: pending.sequence, scheduled: pending.scheduledWall, outcome: .held, reason: reason))
        }
        return "held"
    }

    /// Takes one of the owner's runs for this minute (`user_max_runs_per_minute`); root's and timerd's
    /// own jobs are not limited. False when the owner is over the limit.
    mutating func takeRunToken(ownerUID: UInt32) -> Bool {
        guard !settings.isAdmin(ownerUID) else { return true }
        let limit = settings.userMaxRunsPerMinute
        var bucket = runBuckets[ownerUID] ?? TokenBucket(capacity: limit, perSecond: Double(limit) / 60, now: now.mono)
        if bucket.capacity != Double(limit) { bucket = TokenBucket(capacity: limit, perSecond: Double(limit) / 60, now: now.mono) }
        let taken = bucket.take(now: now.mono)
        runBuckets[ownerUID] = bucket
        return taken
    }

    // MARK: - Runs

    mutating func runStarted(_ name: JobName, jobID: UInt64, run: Int, pid: Int32?) {
        log(.debug, name, run: run, pid.map { "started, pid \($0)" } ?? "request started")
        decide(.running(name, run: run, pid: pid))
    }

    mutating func runFinished(_ name: JobName, jobID: UInt64, run runID: Int, outcome: RunOutcome) {
        runningTotal -= 1
        if let pool = runPools.removeValue(forKey: RunKey(jobID: jobID, run: runID)) {
            runningByPool[pool, default: 1] -= 1
        }
        runsByResult[outcome.result] += 1
        if let job = jobs[name], job.id == jobID {
            let finished = job.active.first { $0.id == runID }
            job.active.removeAll { $0.id == runID }
            // A failed attempt with retries left is tried again; the fire's result is its last attempt's.
            let retry = finished.flatMap { retryAfter(job, $0, outcome) }
            let previous = job.lastFinalResult
            if retry == nil {
                job.lastFinalResult = outcome.result
                job.consecutiveFailures = outcome.result == .ok ? 0 : job.consecutiveFailures + 1
            }
            // `pause_after_failures`: this failure is the last of the run of failures it waits for.
            var pausing: String?
            if retry == nil, let limit = job.spec.pauseAfterFailures, job.consecutiveFailures >= limit, job.state == .scheduled {
                pausing = "paused after \(job.consecutiveFailures) failed runs in a row (pause_after_failures=\(limit)); "
                    + "RESUME it once the cause is fixed"
            }
            if let finished {
                let history = FinishedRun(
                    job: name, run: runID, scheduledAt: finished.kind == .manual ? nil : finished.scheduledWall,
                    startedAt: finished.startedWall, lateness: finished.kind == .manual ? nil : finished.lateness, outcome: outcome,
                    node: settings.clusterNode, attempt: finished.attempt, parameters: finished.parameters)
                if job.spec.historyLimit > 0, job.spec.owner == nil { out.append(.persist(.run(history, keep: job.spec.historyLimit))) }
                if job.shared { out.append(.publishRun(history, final: retry == nil)) }
                if finished.sequence != 0 {
                    let led = retry.map { "attempt \(finished.attempt) failed; attempt \(finished.attempt + 1) in \(DurationText.format($0))" }
                        ?? pausing.map { "the job was \($0)" }
                    record(job, FireRecord(job: name, sequence: finished.sequence, scheduled: finished.scheduledWall, outcome: .ran,
                                      run: runID, lateness: finished.lateness, result: outcome.result, reason: led))
                }
            }
            var kept = outcome
            kept.output = ""
            job.lastOutcome = (runID, kept)
            job.runsByResult[outcome.result] += 1
            if outcome.usage != RunUsage() { job.usageTotals.add(outcome.usage) }
            if outcome.result == .ok { job.lastSuccess = outcome.finishedWall }
            // The interpreter logs the run's end from this decision, with its exit status for the journal.
            decide(.finished(name, run: runID, outcome: outcome))
            if let retry, let finished { noteRetry(job, finished, outcome, after: retry) }
            // `on_failure` when a run fails after a success (or as the job's first run), `on_recovery` when
            // one succeeds after a failure: once per transition; and `on_failure` again when the failures
            // pause the job, saying so.
            if retry != nil {
                // Told once the fire's last attempt has ended.
            } else if outcome.result == .ok {
                if let previous, previous != .ok, job.spec.onRecovery != nil {
                    out.append(.notifyTransition(name, run: runID, outcome: outcome, recovered: true))
                }
            } else if previous == nil || previous == .ok || pausing != nil, job.spec.onFailure != nil {
                var told = outcome
                if let pausing { told.reason += "; the job was \(pausing)" }
                out.append(.notifyTransition(name, run: runID, outcome: told, recovered: false))
            }
            if let pausing {
                pause([name], reason: pausing)
                if let queued = job.queued {
                    job.queued = nil
                    noteSkip(job, count: 1, scheduled: queued.scheduledWall, sequence: queued.sequence, reason: "the job was \(pausing)")
                }
            }
            if job.active.isEmpty, let queued = job.queued {
                job.queued = nil
                if !shuttingDown, !isCancelPending(job) { _ = startOrWait(job, queued) }
            }
            runMissed(job)
            // The fire's last attempt has ended: the jobs that follow this one, as their `after_result` says.
            if retry == nil, !isCancelPending(job) { triggerFollowers(of: job, run: runID, succeeded: outcome.result == .ok, endedAt: outcome.finishedWall) }
            noteIfIdleAndFinished(job)
        } else {
            orphanRuns.removeAll { $0.jobID == jobID && $0.run == runID }
            log(.info, name, run: runID, "run of a removed job ended: \(outcome.summary)")
        }
        startWaitingRuns()
        if shuttingDown, runningTotal == 0 { out.append(.drained) }
    }

    /// When run `run` of `job` failed (or timed out) and its fire has attempts left (`retries`): sets the
    /// next attempt on the job, due a random time in [d/2, d] from now (`RetryPolicy`), arms for it, and
    /// returns the delay. Nil (no retry) for a success, a run that was stopped or killed, a job paused or
    /// being cancelled, and while timerd stops.
    mutating func retryAfter(_ job: EngineJob, _ run: ActiveRun, _ outcome: RunOutcome) -> Duration? {
        guard let policy = job.spec.commandRetries, run.attempt <= policy.retries,
              outcome.result == .failed || outcome.result == .timeout,
              job.state != .paused, !shuttingDown, jobs[job.name] === job, !isCancelPending(job) else { return nil }
        let ceiling = RetryPolicy.ceiling(policy.backoff, retry: run.attempt)
        let delay = Duration.nanoseconds(Int64.random(in: ceiling.nanoseconds / 2...ceiling.nanoseconds, using: &random))
        let due = now.mono + delay
        job.pendingRetry = PendingRetry(
            due: due, fire: PendingFire(kind: run.kind, scheduled: due, scheduledWall: run.scheduledWall, sequence: run.sequence,
                                        attempt: run.attempt + 1, parameters: run.parameters, trigger: run.trigger))
        arm(job)
        return delay
    }

    /// Says that run `run` of `job` is tried again in `delay` (after the run's own end has been said).
    mutating func noteRetry(_ job: EngineJob, _ run: ActiveRun, _ outcome: RunOutcome, after delay: Duration) {
        let retries = job.spec.commandRetries?.retries ?? 0
        let reason = "attempt \(run.attempt) of \(retries + 1) \(outcome.result == .timeout ? "timed out" : "failed"); "
            + "attempt \(run.attempt + 1) in \(DurationText.format(.milliseconds(delay.nanoseconds / 1_000_000)))"
        log(.notice, job.name, run: run.id, reason)
        decide(.retrying(job.name, run: run.id, attempt: run.attempt + 1, after: delay, reason: reason))
    }

    /// Fires the jobs that follow `job` (`after=`) whose `after_result` matches how run `run` ended (at
    /// `endedAt`, here or on another node of the cluster): each as a scheduled fire of its own (modes,
    /// overlap, pools and the run rate apply), due now, its run told which run fired it. Only followers
    /// that run on this node fire here: a shared one on its owner, which hears of the upstream's end
    /// wherever it ran, and claims the fire under `endedAt`, the same on every node. A paused or finished
    /// follower does not fire (a paused one says so).
    mutating func triggerFollowers(of job: EngineJob, run: Int, succeeded: Bool, endedAt: WallTime) {
        guard !shuttingDown else { return }
        for name in jobs.followers(of: job.name) {
            guard let follower = jobs[name], !isCancelPending(follower), !follower.shared || runsHere(follower),
                  (follower.spec.afterResult ?? .success).matches(succeeded: succeeded) else { continue }
            let pending = PendingFire(kind: .scheduled, scheduled: now.mono, scheduledWall: follower.shared ? endedAt : now.wall,
                                      sequence: nextFireSequence(follower), trigger: RunTrigger(job: job.name, run: run))
            let how = "\(job.name) run \(run) \(succeeded ? "succeeded" : "failed") (after=\(job.name)"
                + ", after_result=\((follower.spec.afterResult ?? .success).rawValue))"
            guard follower.state == .scheduled else {
                if follower.state == .paused {
                    noteSkip(follower, count: 1, scheduled: now.wall, sequence: pending.sequence, reason: "paused when \(how)")
                }
                continue
            }
            log(.info, name, "triggered: \(how)")
            decide(.fired(name, scheduled: now.wall, lateness: .zero, byTimer: false))
            fire(follower, pending)
            if case .triggered = follower.spec.schedule {
                // Its fires are these: what a restart counts from (a grid or calendar job keeps its own).
                follower.lastScheduledWall = now.wall
                persistFire(follower)
            }
            continueSchedule(follower)
        }
    }

    /// Starts parked fires while there are free run slots, oldest first; one whose pool is full waits on
    /// without holding up those behind it.
    mutating func startWaitingRuns() {
        var index = 0
        while runningTotal < settings.maxRunning, index < waiting.count, !shuttingDown {
            let next = waiting[index]
            guard let job = jobs[next.name], job.id == next.jobID, !isCancelPending(job) else {
                waiting.remove(at: index)
                continue
            }
            if poolIsFull(job) {
                index += 1
                continue
            }
            waiting.remove(at: index)
            job.waitingForSlot -= 1
            startRun(job, next.fire)
        }
    }

    /// Whether the job's pool has as many runs going as its `max_running` (false without a pool, or for a
    /// pool the config no longer declares).
    func poolIsFull(_ job: EngineJob) -> Bool {
        guard let pool = job.spec.pool, let cap = settings.pools[pool] else { return false }
        return runningByPool[pool, default: 0] >= cap
    }

    /// Starts the next missed fire queued by `catchUp` once the job has nothing running; called again
    /// when each of its runs ends.
    mutating func runMissed(_ job: EngineJob) {
        guard !job.replays.isEmpty, job.active.isEmpty, job.waitingForSlot == 0, !shuttingDown, !isCancelPending(job),
              jobs[job.name] === job else { return }
        let name = job.name
        let due = job.replays.removeFirst()
        let late = max(.zero, now.wall - due)
        decide(.fired(name, scheduled: due, lateness: late, byTimer: false))
        fire(job, PendingFire(kind: .scheduled, scheduled: now.mono - late, scheduledWall: due, sequence: nextFireSequence(job)))
        persistFire(job)
    }

    // MARK: - Fires not run

    /// Counts fires that did not run, whatever the cause: `skipped` in `show` and `STATS`, and the reason
    /// users will ask for as the last skip.
    mutating func countNotRun(_ job: EngineJob, _ count: Int, reason: String) {
        skippedTotal += count
        job.skipped += count
        job.lastSkip = (now.wall, reason)
    }

    /// Records fires that did not run, with the reason users will ask for.
    mutating func noteSkip(_ job: EngineJob, count: Int, scheduled: WallTime?, sequence: UInt64 = 0, reason: String) {
        let name = job.name
        countNotRun(job, count, reason: reason)
        log(.notice, name, Self.notRunLine(count, reason))
        decide(.skipped(name, scheduled: scheduled, count: count, reason: reason))
        if sequence != 0, let scheduled {
            record(job, FireRecord(job: name, sequence: sequence, scheduled: scheduled, outcome: .skipped, reason: reason))
        }
    }

    /// Records fires missed while the daemon could not fire (counted as skipped, as `show` reports them).
    mutating func noteMissed(_ job: EngineJob, count: Int, scheduled: WallTime?, reason: String) {
        let name = job.name
        countNotRun(job, count, reason: reason)
        log(.notice, name, Self.notRunLine(count, reason))
        decide(.missed(name, scheduled: scheduled, count: count, reason: reason))
        if let scheduled {
            let sequence = nextFireSequence(job)
            record(job, FireRecord(job: name, sequence: sequence, scheduled: scheduled, outcome: .missed,
                              reason: count == 1 ? reason : "\(reason) (\(count) fires from this one on)"))
        }
    }

    private static func notRunLine(_ count: Int, _ reason: String) -> String {
        count == 1 ? "fire skipped: \(reason)" : "\(count) fires skipped: \(reason)"
    }

    /// A fire that waits (behind a run, for a slot): said once, and recorded until it starts.
    private mutating func noteWaiting(_ job: EngineJob, _ pending: PendingFire, outcome: FireOutcome, reason: String) {
        let name = job.name
        decide(.queued(name, scheduled: pending.scheduledWall, reason: reason))
        if pending.sequence != 0 {
            record(job, FireRecord(job: name, sequence: pending.sequence, scheduled: pending.scheduledWall, outcome: outcome, reason: reason))
        }
    }

    // MARK: - Records

    /// Numbers a new due fire of the job (its `WHY` record is written by what becomes of it).
    func nextFireSequence(_ job: EngineJob) -> UInt64 {
        job.fireSequence += 1
        return job.fireSequence
    }

    mutating func record(_ job: EngineJob, _ record: FireRecord) {
        guard job.spec.owner == nil, settings.fireRecordsKept > 0 else { return }
        out.append(.persist(.fireRecord(record, keep: settings.fireRecordsKept)))
    }

    /// Jobs that come back after a restart: added at run time and not bound to an owner.
    /// (The owner is read in the spec's box: `job.spec` copies the whole spec, and a `CANCEL` of 100,000
    /// jobs asks this of each of them.)
    package func isDurable(_ job: EngineJob) -> Bool { job.origin == .runtime && job.specBox.spec.owner == nil }

    package func storedState(_ job: EngineJob) -> StoredJobState {
        StoredJobState(
            name: job.spec.name, options: job.spec.options, paused: job.state == .paused, runs: job.runs, addedAt: job.addedWall,
            lastScheduled: job.lastScheduledWall, anchor: job.anchorWall, ownerUID: job.ownerUID, shared: job.shared)
    }

    /// Stores the job as it is now (if it is durable).
    mutating func persistJob(_ job: EngineJob) {
        guard isDurable(job) else { return }
        persist(.job(storedState(job)))
    }

    /// Stores a job's last scheduled fire and run count.
    mutating func persistFire(_ job: EngineJob) {
        let name = job.name
        if isDurable(job) {
            persist(.fire(name, runs: job.runs, lastScheduled: job.lastScheduledWall, configJob: false))
        } else if job.origin != .runtime, job.lastScheduledWall != nil {
            out.append(.persist(.fire(name, runs: job.runs, lastScheduled: job.lastScheduledWall, configJob: true)))
        }
    }

    /// Queues a finished runtime job with nothing in flight for pruning.
    mutating func noteIfIdleAndFinished(_ job: EngineJob) {
        guard job.origin == .runtime, job.state == .finished, job.isIdle, jobs[job.name] === job else { return }
        let name = job.name
        finishedRuntimeJobs.append((name, job.id))
        while finishedRuntimeJobs.count > Self.finishedRuntimeJobsKept {
            let (oldest, id) = finishedRuntimeJobs.removeFirst()
            // Only if it is still that same finished job (not cancelled, re-added, or re-run meanwhile).
            if let job = jobs[oldest], job.id == id, job.state == .finished, job.isIdle {
                jobs[oldest] = nil
                if isDurable(job) { out.append(.persist(.deleteJob(oldest))) }
                log(.debug, oldest, "forgotten: more than \(Self.finishedRuntimeJobsKept) finished runtime jobs are kept")
            }
        }
    }
}
