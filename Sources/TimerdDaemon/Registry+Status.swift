import Dispatch
import TimerdCore
import TimerdSystem

extension Registry {
    /// `12 jobs, 2 running, next: backup at 16:04:05` (local time), for systemd's `STATUS=`.
    func statusLine() -> String {
        var next: (name: JobName, at: WallTime)?
        for (name, job) in jobs where job.state == .scheduled {
            let at: WallTime?
            if let mono = job.nextMono {
                at = wallTime(ofMono: mono)
            } else {
                at = job.nextWall
            }
            if let at, next == nil || at < next!.at { next = (name, at) }
        }
        let base = clusterStatus() + "\(jobs.count) job\(jobs.count == 1 ? "" : "s"), \(runningTotal) running"
        guard let next else { return base + ", nothing scheduled" }
        let seconds = next.at.nanosecondsSinceEpoch / 1_000_000_000
        return base + ", next: \(next.name) at \(SystemClock.localTimeOfDay(seconds))"
    }

    /// `cluster leader; `, `cluster follower (leader b); `, `cluster: etcd unavailable; ` (nothing on a
    /// single host).
    func clusterStatus() -> String {
        guard cluster != nil else { return "" }
        switch clusterRole {
        case .leader: return "cluster leader; "
        case .follower: return "cluster follower (leader \(clusterLeader ?? "none yet")); "
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
        queue.asyncAfter(deadline: .now() + .milliseconds(200)) { [unowned self] in
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

    /// SIGKILL to every run's process group now (a second SIGTERM while stopping).
    func killAllRuns(reason: String) {
        for job in jobs.values {
            for run in job.active { run.handle?.kill(reason: reason) }
        }
        for handle in orphanHandles.values { handle.kill(reason: reason) }
    }
}
