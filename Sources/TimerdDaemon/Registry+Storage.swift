import TimerdCore
import TimerdEngine
import TimerdStore
import TimerdSystem

/// The state store's health as the daemon shows it: logged once per episode, on `WATCH`, in `STATUS=`;
/// and the snapshot of durable jobs the store writes when it has to start a fresh `state.db`.
extension Registry {
    /// Listens to the store (no-op without one).
    func watchStoreHealth() {
        guard let store else { return }
        store.onHealthChange { [unowned self] change in
            self.enqueue { $0.storeHealthChanged(change) }
        }
        store.setSnapshotProvider { [unowned self] in self.storeSnapshot.withLock { $0 } }
        let log = self.log
        store.onDiagnostic { log.warning("state: \($0)") }
    }

    private func storeHealthChanged(_ change: StoreHealthChange) {
        switch change {
        case .failing(_, let reason):
            log.error(
                "state: cannot write: \(reason). Jobs keep firing; changes are refused (storage-unavailable) and fire "
                    + "bookkeeping and run history are held until it can write again")
            emitDaemonEvent("storage", reason: "failing: \(reason)")
            // What the store writes if it has to start a fresh state.db: the jobs as they are now; what
            // changes after comes in the held changes, which are written after it.
            storeSnapshot.withLock { $0 = durableSnapshot() }
        case .recovered(let after, let written, let lost, let rebuilt):
            // Whole seconds (milliseconds under one): "after 3s", not "after 3s9ms67us851ns".
            let unit: Int64 = after < .seconds(1) ? 1_000_000 : 1_000_000_000
            let shown = Duration.nanoseconds(after.nanoseconds / unit * unit)
            var message = "state: writing again after \(DurationText.format(shown)); wrote \(written.counted("held change"))"
            if lost > 0 { message += "; \(lost.counted("change")) of run history could not be held and \(lost == 1 ? "is" : "are") lost" }
            if rebuilt { message += "; state.db is a new file now, with every job as it is in memory: the run history before is not in it" }
            if lost > 0 || rebuilt { log.warning(message) } else { log.notice(message) }
            emitDaemonEvent("storage", reason: "ok: " + message.dropFirst("state: ".count))
            storeSnapshot.withLock { $0 = nil }
        }
        noteStatusChange()
    }

    /// Every durable job as `state.db` should hold it, and the config jobs' last fires.
    private func durableSnapshot() -> [StoreChange] {
        var changes: [StoreChange] = []
        for job in engine.liveJobs.sorted(by: { $0.name < $1.name }) {
            let name = job.name
            if engine.isDurable(job) {
                Self.storeChange(.job(engine.storedState(job))).map { changes.append($0) }
            } else if job.origin != .runtime, let last = job.lastScheduledWall {
                changes.append(.recordConfigJobFire(name.rawValue, lastScheduled: last))
            }
        }
        return changes
    }
}
