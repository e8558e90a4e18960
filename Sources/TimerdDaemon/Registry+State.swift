import Dispatch
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdStore
import TimerdSystem

/// Durable state: the engine's `persist` effects, written by the `StateStore` (SQLite) on its own queue,
/// never on the registry's; a request that changed jobs is answered only once they are on disk
/// (`durable()`). At start-up, what the store holds goes back into the engine (`restore`).
extension Registry {
    /// Hands one change to the store (no-op without one). Failures are logged; `durable()` reports them
    /// to the request that waits.
    func persist(_ change: Persist) {
        guard let store else { return }
        let stored: StoreChange
        switch change {
        case .job(let state):
            stored = .putJob(StoredJob(
                name: state.name.rawValue, options: state.options, paused: state.paused, runs: state.runs, addedAt: state.addedAt,
                lastScheduled: state.lastScheduled, anchor: state.anchor, ownerUID: state.ownerUID, shared: state.shared))
        case .deleteJob(let name):
            stored = .deleteJob(name.rawValue)
        case .fire(let name, let runs, let lastScheduled, let configJob):
            if configJob {
                guard let lastScheduled else { return }
                stored = .recordConfigJobFire(name.rawValue, lastScheduled: lastScheduled)
            } else {
                stored = .recordFire(name.rawValue, runs: runs, lastScheduled: lastScheduled)
            }
        case .run(let record, let keep):
            let outcome = record.outcome
            stored = .recordRun(StoredRun(
                job: record.job.rawValue, run: record.run, scheduledAt: record.scheduledAt, startedAt: record.startedAt,
                endedAt: outcome.finishedWall, result: outcome.result.rawValue, exitCode: outcome.exitCode,
                httpStatus: outcome.httpStatus, latenessMs: record.lateness.map { Double($0.nanoseconds) / 1_000_000 },
                output: outcome.output, node: record.node), keep: keep)
        case .fireRecord(let record, let keep):
            return holdFireRecord(StoredFire(
                job: record.job.rawValue, sequence: record.sequence, scheduled: record.scheduled, outcome: record.outcome.rawValue,
                run: record.run, latenessMs: record.lateness.map { Double($0.nanoseconds) / 1_000_000 }, result: record.result?.rawValue,
                reason: record.reason), keep: keep)
        }
        if case .deleteJob(let name) = change {
            pendingFireRecords = pendingFireRecords.filter { $0.key.job != name.rawValue }
        }
        let log = self.log
        store.apply([stored]) { result in
            if case .failure(let error) = result { log.error("cannot save the state: \(error.message)") }
        }
    }

    /// A fire's `WHY` record changes two or three times within milliseconds (queued, ran, its result):
    /// records are written together every 100 ms, each once, so they cost the store about one write per
    /// fire. (They are diagnostics: a crash loses at most the last 100 ms of them, never a job or a run.)
    private func holdFireRecord(_ fire: StoredFire, keep: Int) {
        pendingFireRecords[FireRecordKey(job: fire.job, sequence: fire.sequence)] = (fire, keep)
        guard !fireRecordFlushScheduled else { return }
        fireRecordFlushScheduled = true
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [unowned self] in
            self.assumeIsolated { $0.flushFireRecords() }
        }
    }

    /// Hands the held `WHY` records to the store, oldest first.
    func flushFireRecords() {
        fireRecordFlushScheduled = false
        guard let store, !pendingFireRecords.isEmpty else { return }
        let changes = pendingFireRecords.sorted { ($0.key.job, $0.key.sequence) < ($1.key.job, $1.key.sequence) }
            .map { StoreChange.recordDueFire($0.value.fire, keep: $0.value.keep) }
        pendingFireRecords = [:]
        let log = self.log
        store.apply(changes) { result in
            if case .failure(let error) = result { log.error("cannot save the fire records: \(error.message)") }
        }
    }

    /// Returns once every change handed to the store so far is on disk. Called before `OK` to a request
    /// that changed jobs; never on the registry's queue.
    nonisolated func durable() async throws(TimerdError) {
        guard let store else { return }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StoreError>, Never>) in
            store.apply([]) { continuation.resume(returning: $0) }
        }
        if case .failure(let error) = result {
            throw TimerdError(.internal, "the change is in effect but could not be saved: \(error.message)")
        }
    }

    // MARK: - Restoring after a restart

    /// Brings back what `state.db` holds (after the config jobs are loaded): the runtime jobs, the config
    /// jobs' last fires and every job's last run; the engine applies each job's `misfire` policy.
    func restore(_ stored: [StoredJob], configFires: [String: WallTime]) {
        var state = RestoredState()
        for (name, time) in configFires {
            if let name = try? JobName(name) { state.configFires[name] = time }
        }
        for (name, sequence) in (try? store?.dueFireSequences()) ?? [:] {
            if let name = try? JobName(name) { state.fireSequences[name] = sequence }
        }
        for name in engine.jobs.keys { lastRun(name).map { state.lastRuns[name] = $0 } }
        for item in stored {
            guard let name = try? JobName(item.name) else { continue }
            do {
                let spec = try JobSpec(name: name, options: item.options)
                state.jobs.append(RestoredJob(
                    stored: StoredJobState(
                        name: name, options: item.options, paused: item.paused, runs: item.runs, addedAt: item.addedAt,
                        lastScheduled: item.lastScheduled, anchor: item.anchor, ownerUID: item.ownerUID ?? Client.daemonUID,
                        shared: item.shared),
                    spec: spec, civil: try HostConfig.civilSchedule(for: spec)))
            } catch {
                log.error(job: item.name, "not restored: \(error.message)")
                continue
            }
            lastRun(name).map { state.lastRuns[name] = $0 }
        }
        deliver(.restore(state))
        for (name, job) in engine.jobs {
            if let run = state.lastRuns[name], !run.outcome.output.isEmpty {
                outputs.hold(run.outcome.output, of: name, jobID: job.id, limit: access.settings.maxOutputMemory, log: log)
            }
        }
    }

    /// `show`'s last run after a restart: the newest run in the history.
    private func lastRun(_ name: JobName) -> FinishedRun? {
        guard let store, let last = try? store.history(job: name.rawValue, limit: 1).first else { return nil }
        let result = RunOutcome.Result(rawValue: last.result) ?? .failed
        return FinishedRun(
            job: name, run: last.run, scheduledAt: last.scheduledAt, startedAt: last.startedAt,
            lateness: last.latenessMs.map { .nanoseconds(Int64($0 * 1_000_000)) },
            outcome: RunOutcome(
                result: result, exitCode: last.exitCode, httpStatus: last.httpStatus,
                reason: last.exitCode.map { "exited with status \($0)" } ?? last.httpStatus.map { "status \($0)" } ?? last.result,
                output: last.output, finishedWall: last.endedAt, duration: max(.zero, last.endedAt - last.startedAt)),
            node: last.node)
    }
}
