import Dispatch
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdHost
import TimerdStore
import TimerdSystem

/// Durable state, written by the `StateStore` (SQLite) on its own queue, never on the registry's.
///
/// A request's change is written ahead (`Effect.writeAhead`), all or nothing, and takes effect only
/// once it is on disk; if it cannot be written the request gets `storage-unavailable` and nothing
/// changed. Everything else (fire bookkeeping, run history, `WHY` records) is written behind: the store
/// holds what it cannot write yet and writes it when it can (`docs/state.md`). At start-up, what the
/// store holds goes back into the engine (`restore`).
extension Registry {
    /// Writes requests' records, each request's as one all-or-nothing batch, in one transaction (at once
    /// without a store, as in unit tests): the result for each, in order.
    func writeAhead(_ records: [[Persist]]) async -> [Result<Void, TimerdError>] {
        guard let store else { return records.map { _ in .success(()) } }
        // Many records (a CANCEL of 100,000 jobs) are turned into the store's changes off the queue.
        let convert = { @Sendable in records.map { $0.compactMap(Self.storeChange) } }
        let batches = records.reduce(0) { $0 + $1.reduce(0) { $0 + $1.weight } } <= Self.namesSlice
            ? convert() : await Task.detached(operation: convert).value
        let results = await withCheckedContinuation { (continuation: CheckedContinuation<[Result<Void, StoreError>], Never>) in
            store.apply(batches: batches) { continuation.resume(returning: $0) }
            // In the store's queue now: the connection may start its next requests, which then share
            // this transaction unless they name the same jobs.
            RequestProgress.handedOver.callback?()
        }
        return results.map { result in
            result.mapError { error in
                TimerdError(.storageUnavailable, "the change could not be saved, so it was not made: \(error.message)")
            }
        }
    }

    /// Failpoint `hold-cancel-deletes`: the deletions of a cancel's jobs beyond its first slice are not
    /// handed to the store.
    static let holdsCancelDeletes = Daemon.failpoints.contains("hold-cancel-deletes")

    /// Hands one background change to the store (no-op without one).
    func persist(_ change: Persist) {
        guard let store, let stored = Self.storeChange(change) else { return }
        switch stored {
        case .recordDueFire(let fire, let keep):
            return holdFireRecord(fire, keep: keep)
        case .deleteJob(let name):
            pendingFireRecords = pendingFireRecords.filter { $0.key.job != name }
        case .deleteCancelled(_, let names, let done, _):
            // Test hook, documented in docs/state.md: as if timerd were killed once a cancel's first
            // slice of rows is deleted (their names given back, as always, only after that).
            if Self.holdsCancelDeletes, done > Engine.cancelRemoveSlice { return }
            if !pendingFireRecords.isEmpty {
                let gone = Set(names)
                pendingFireRecords = pendingFireRecords.filter { !gone.contains($0.key.job) }
            }
        default:
            break
        }
        store.record([stored])
    }

    /// The store's form of an engine record (nil for one that writes nothing; `WHY` records are held
    /// and written together, see `holdFireRecord`).
    nonisolated static func storeChange(_ change: Persist) -> StoreChange? {
        switch change {
        case .job(let state):
            return .putJob(StoredJob(
                name: state.name.rawValue, options: state.options, paused: state.paused, runs: state.runs, addedAt: state.addedAt,
                lastScheduled: state.lastScheduled, anchor: state.anchor, ownerUID: state.ownerUID, shared: state.shared))
        case .deleteJob(let name):
            return .deleteJob(name.rawValue)
        case .forgetConfigJob(let name):
            return .recordConfigJobFire(name.rawValue, lastScheduled: nil)
        case .cancelJobs(let change, let names):
            return .markCancelled(id: Int64(truncatingIfNeeded: change), names: names.map(\.rawValue))
        case .cancelledGone(let change, let names, let done, let finished):
            return .deleteCancelled(id: Int64(truncatingIfNeeded: change), names: names.map(\.rawValue), done: done, finished: finished)
        case .fire(let name, let runs, let lastScheduled, let configJob):
            if configJob {
                guard let lastScheduled else { return nil }
                return .recordConfigJobFire(name.rawValue, lastScheduled: lastScheduled)
            }
            return .recordFire(name.rawValue, runs: runs, lastScheduled: lastScheduled)
        case .run(let record, let keep):
            let outcome = record.outcome
            return .recordRun(StoredRun(
                job: record.job.rawValue, run: record.run, scheduledAt: record.scheduledAt, startedAt: record.startedAt,
                endedAt: outcome.finishedWall, result: outcome.result.rawValue, exitCode: outcome.exitCode,
                httpStatus: outcome.httpStatus, latenessMs: record.lateness.map { Double($0.nanoseconds) / 1_000_000 },
                output: outcome.output, node: record.node, cpuUsageMs: outcome.usage.cpuMilliseconds,
                memoryPeakBytes: outcome.usage.memoryPeakBytes.map(Int.init), ioReadBytes: outcome.usage.ioReadBytes.map(Int.init),
                ioWriteBytes: outcome.usage.ioWriteBytes.map(Int.init), attempt: record.attempt,
                parameters: record.parameters.map { Payload.encode($0) }, reason: outcome.reason, signal: outcome.signal), keep: keep)
        case .fireRecord(let record, let keep):
            return .recordDueFire(StoredFire(
                job: record.job.rawValue, sequence: record.sequence, scheduled: record.scheduled, outcome: record.outcome.rawValue,
                run: record.run, latenessMs: record.lateness.map { Double($0.nanoseconds) / 1_000_000 }, result: record.result?.rawValue,
                reason: record.reason), keep: keep)
        }
    }

    /// A fire's `WHY` record changes two or three times within milliseconds (queued, ran, its result):
    /// records are written together every 100 to 150 ms, each once, so they cost the store about one write per
    /// fire. (They are diagnostics: a crash loses at most the last 100 ms of them, never a job or a run.)
    private func holdFireRecord(_ fire: StoredFire, keep: Int) {
        pendingFireRecords[FireRecordKey(job: fire.job, sequence: fire.sequence)] = (fire, keep)
        guard !fireRecordFlushScheduled else { return }
        fireRecordFlushScheduled = true
        // Weak: a registry that goes (at the end of a test) drops the records it held.
        // From the IOWatcher's loop when it next wakes, which runs this queue's work itself (a Dispatch
        // timer woke two threads).
        IOWatcher.shared.after(.now() + .milliseconds(100), leeway: .milliseconds(50), on: queue) { [weak self] in
            self?.assumeIsolated { $0.flushFireRecords() }
        }
    }

    /// Hands the held `WHY` records to the store, oldest first.
    func flushFireRecords() {
        fireRecordFlushScheduled = false
        guard let store, !pendingFireRecords.isEmpty else { return }
        let changes = pendingFireRecords.sorted { ($0.key.job, $0.key.sequence) < ($1.key.job, $1.key.sequence) }
            .map { StoreChange.recordDueFire($0.value.fire, keep: $0.value.keep) }
        pendingFireRecords = [:]
        store.record(changes)
    }

    /// At stop: writes what the store has (what it still holds then, when it cannot write, is lost with
    /// the stop, and the log says how much) and closes it, so its log goes back into `state.db`. Never on
    /// the registry's queue.
    nonisolated func closeStore() async {
        guard let store else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                store.flush()
                let held = store.counters.backlog
                if held > 0, case .failing(_, let reason) = store.health {
                    self.log.error("state: \(held.counted("held change")) of fire bookkeeping and run history \(held == 1 ? "is" : "are") lost with the stop (\(reason))")
                }
                store.close()
                continuation.resume()
            }
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

    /// `show`'s last run after a restart: the newest run in the history, with the reason, signal and usage
    /// it was recorded with (runs recorded before schema version 9 have no reason: it is made up).
    private func lastRun(_ name: JobName) -> FinishedRun? {
        guard let store, let last = try? store.history(job: name.rawValue, limit: 1).first else { return nil }
        let result = RunOutcome.Result(rawValue: last.result) ?? .failed
        return FinishedRun(
            job: name, run: last.run, scheduledAt: last.scheduledAt, startedAt: last.startedAt,
            lateness: last.latenessMs.map { .nanoseconds(Int64($0 * 1_000_000)) },
            outcome: RunOutcome(
                result: result, exitCode: last.exitCode, signal: last.signal, httpStatus: last.httpStatus,
                reason: last.reason
                    ?? last.exitCode.map { "exited with status \($0)" } ?? last.httpStatus.map { "status \($0)" } ?? last.result,
                output: last.output, finishedWall: last.endedAt, duration: max(.zero, last.endedAt - last.startedAt),
                usage: RunUsage(
                    cpu: last.cpuUsageMs.map { .nanoseconds(Int64(($0 * 1_000).rounded()) * 1_000) },
                    memoryPeakBytes: last.memoryPeakBytes.map(Int64.init), ioReadBytes: last.ioReadBytes.map(Int64.init),
                    ioWriteBytes: last.ioWriteBytes.map(Int64.init))),
            node: last.node)
    }
}

extension Persist {
    /// About how much work turning it into the store's change is (`writeAhead` does many off the queue).
    var weight: Int {
        if case .cancelJobs(_, let names) = self { names.count } else { 1 }
    }
}
