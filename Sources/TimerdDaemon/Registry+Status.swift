import Dispatch
import TimerdCore
import TimerdEngine
import TimerdSystem

extension Registry {
    /// `12 jobs, 2 running, next: backup at 16:04:05` (local time), for systemd's `STATUS=`. The next fire
    /// is the earlier of the two clocks' first deadlines in the registry's timers (`DeadlineQueue.first`):
    /// the jobs armed on this node, which are the ones that fire here. Looking at every job instead, at
    /// each update (up to 5 a second while jobs fire), held other jobs' fires back 28-52 ms with 100,000
    /// jobs (docs/performance.md, "The status line (round 15)").
    func statusLine() -> String {
        var next: (name: JobName, at: WallTime)?
        let now = clock.now()
        for kind in DeadlineQueue.ClockKind.allCases {
            guard let (name, nanoseconds) = timers.queue.first(kind) else { continue }
            let at = switch kind {
            case .mono: now.wall(of: MonoInstant(nanosecondsSinceBoot: UInt64(clamping: nanoseconds)))
            case .wall: WallTime(nanosecondsSinceEpoch: nanoseconds)
            }
            if next == nil || at < next!.at || (at == next!.at && name < next!.name) { next = (name, at) }
        }
        let count = engine.jobs.count - engine.cancelPendingCount
        let base = storageStatus() + clusterStatus() + "\(count.counted("job")), \(engine.runningTotal) running"
        guard let next else { return base + ", nothing scheduled" }
        let seconds = next.at.nanosecondsSinceEpoch / 1_000_000_000
        return base + ", next: \(next.name) at \(SystemClock.localTimeOfDay(seconds))"
    }

    /// `state not saved (disk full): changes refused; ` while the store cannot write (nothing otherwise).
    func storageStatus() -> String {
        guard case .failing(_, let reason)? = store?.health else { return "" }
        return "state not saved (\(reason)): changes refused; "
    }

    /// `cluster: 3 members, runs 4 of 12 shared jobs; `, `cluster: etcd unavailable, shared jobs stopped; `
    /// (nothing on a single host).
    func clusterStatus() -> String {
        guard cluster != nil else { return "" }
        switch engine.clusterRole {
        case .member:
            let shared = engine.liveJobs.filter(\.shared)
            let here = shared.reduce(0) { $0 + (engine.runsHere($1) ? 1 : 0) }
            return "cluster: \(engine.clusterMembers.count.counted("member")), runs \(here) of \(shared.count.counted("shared job")); "
        case .connecting: return "cluster: connecting to etcd; "
        case .unavailable: return "cluster: etcd unavailable, shared jobs stopped; "
        }
    }

    /// Sends the status line to `observer` now and whenever jobs change (coalesced to one update per
    /// 200 ms, so a busy daemon does not flood the service manager).
    func observeStatus(_ observer: @escaping @Sendable (String) -> Void) {
        statusObserver = observer
        observer(statusLine())
    }

    /// Marks the status as changed; the observer hears about it shortly.
    func noteStatusChange() {
        guard statusObserver != nil, !statusUpdatePending else { return }
        statusUpdatePending = true
        // From the IOWatcher's loop, as the other gatherings (a Dispatch timer woke two threads).
        IOWatcher.shared.after(.now() + .milliseconds(200), leeway: .milliseconds(100), on: queue) { [unowned self] in
            self.assumeIsolated { registry in
                registry.statusUpdatePending = false
                registry.statusObserver?(registry.statusLine())
            }
        }
    }

    /// Pings systemd's watchdog every `interval` from this actor's own queue: if the registry wedges, the
    /// pings stop and systemd restarts the service.
    func startWatchdog(every interval: Duration) {
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = Int(interval.nanoseconds)
        timer.schedule(deadline: .now(), repeating: .nanoseconds(nanoseconds), leeway: .nanoseconds(nanoseconds / 10))
        timer.setEventHandler { Notifier.watchdog() }
        timer.activate()
        watchdogTimer = timer
    }

    /// Test hook (only reachable when `TIMERD_TEST_FAILPOINTS` enables it): blocks the registry's queue
    /// forever, so the watchdog pings stop.
    nonisolated func wedgeForTesting() {
        queue.async {
            self.log.warning("failpoint wedge-registry-on-usr1: the registry queue now blocks forever")
            DispatchSemaphore(value: 0).wait()
        }
    }
}
