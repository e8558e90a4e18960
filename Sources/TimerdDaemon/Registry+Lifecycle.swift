import Dispatch
import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdStore
import TimerdSystem

/// What a reload changed.
struct ReloadSummary: Sendable, Encodable {
    var added: [String] = []
    var changed: [String] = []
    var removed: [String] = []
    var unchanged = 0
}

extension Registry {
    /// Applies a (re-)read config: unchanged jobs keep their timers and state, changed ones are re-armed with
    /// their new spec (keeping counters and pause), removed ones are cancelled, runtime jobs are untouched.
    ///
    /// Checked whole first: a config job whose name a runtime job already has is an `invalid-config` error
    /// and nothing changes. A job whose zone cannot be read is logged and left as it was.
    func applyConfig(_ configured: [ConfiguredJob], maxRunning: Int, pools: [String: Int] = [:]) throws(TimerdError) -> ReloadSummary {
        var declared: [DeclaredJob] = []
        for item in configured {
            let existing = engine.job(item.spec.name)
            do {
                declared.append(DeclaredJob(spec: item.spec, file: item.file, line: item.line, civil: try HostConfig.civilSchedule(for: item.spec)))
            } catch {
                if let existing, existing.origin != .runtime {
                    log.error(job: item.spec.name.rawValue, "cannot apply the changed spec: \(error.message); keeping the old one")
                    declared.append(DeclaredJob(spec: existing.spec, file: item.file, line: item.line, civil: existing.civil))
                } else {
                    log.error(job: item.spec.name.rawValue, "cannot add: \(error.message)")
                }
            }
        }
        // Config jobs new to the engine go on numbering their runs from the state database.
        let arriving = declared.map(\.spec.name).filter { engine.job($0) == nil }.map(\.rawValue)
        let highest = (try? store?.highestRuns(of: arriving)) ?? [:]
        for index in declared.indices { declared[index].runs = highest[declared[index].spec.name.rawValue] ?? 0 }
        // The per-user limits of the config just read (the daemon updated `access` before this call).
        engine.settings.userMaxJobs = access.settings.userMaxJobs
        engine.settings.userMaxRunsPerMinute = access.settings.userMaxRunsPerMinute
        let before = Dictionary(uniqueKeysWithValues: engine.jobs.map { ($0.key, (id: $0.value.id, spec: $0.value.spec, config: $0.value.origin != .runtime)) })
        _ = try deliver(.reload(declared, maxRunning: maxRunning, pools: pools))?.get()
        cluster?.declare(configJobs: sharedConfigJobs())
        var summary = ReloadSummary()
        for (name, old) in before.sorted(by: { $0.key < $1.key }) where old.config && engine.job(name)?.id != old.id {
            summary.removed.append(name.rawValue)
        }
        for item in declared {
            guard let job = engine.job(item.spec.name) else { continue }
            if let old = before[item.spec.name], old.id == job.id {
                if old.spec == job.spec { summary.unchanged += 1 } else { summary.changed.append(item.spec.name.rawValue) }
            } else {
                summary.added.append(item.spec.name.rawValue)
            }
        }
        return summary
    }

    /// Graceful stop: no more fires, running jobs get `grace` to finish, then their process groups are killed.
    /// Returns when no run is left.
    func shutdown(grace: Duration) async {
        deliver(.shutdown)
        defer { flushFireRecords() }
        guard engine.runningTotal > 0 else { return }
        log.notice("stopping: waiting up to \(DurationText.format(grace)) for \(engine.runningTotal.counted("running job"))")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(grace.nanoseconds)))
        timer.setEventHandler { [unowned self] in
            self.assumeIsolated { registry in
                registry.log.warning("stopping: grace period over; killing \(registry.engine.runningTotal.counted("run"))")
                registry.deliver(.killAll(reason: "timerd stopped and the grace period ran out"))
            }
        }
        timer.activate()
        await withCheckedContinuation { drainWaiters.append($0) }
        timer.cancel()
    }

    /// SIGKILL to every run's process group now (a second SIGTERM while stopping).
    func killAllRuns(reason: String) {
        deliver(.killAll(reason: reason))
    }
}
