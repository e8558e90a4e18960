import Dispatch
import TimerdCore
import TimerdEngine

/// The registry's timers: every armed job's deadline in a `DeadlineQueue`, and one Dispatch timer per
/// clock set for the first deadline on it. One armed Dispatch timer per job cost 524 bytes of resident
/// memory each, more than half of an idle job (`docs/architecture.md`, "Timers").
struct RegistryTimers {
    var queue = DeadlineQueue()
    /// Per clock (`DeadlineQueue.ClockKind.rawValue`): its Dispatch timer, made when first needed.
    var sources: [(any DispatchSourceTimer)?] = [nil, nil]
    /// Per clock: the wake its Dispatch timer is set for (nil: not set, or it has gone off).
    var setFor: [DeadlineQueue.Wake?] = [nil, nil]
    /// While due jobs are being delivered, setting the timers waits for the end.
    var delivering = false
}

/// Arming, disarming and the two Dispatch timers (see `RegistryTimers`).
extension Registry {
    /// Arms (or re-arms) the job for `deadline`, then moves its clock's timer if its wake changed.
    func arm(_ name: JobName, jobID: UInt64, _ deadline: Deadline, leeway: Duration) {
        noteStatusChange()
        let (kind, _) = timers.queue.arm(name, jobID: jobID, deadline, leeway: leeway)
        setTimer(kind)
    }

    func disarm(jobID: UInt64) {
        guard timers.queue.disarm(jobID: jobID) else { return }
        noteStatusChange()
        for kind in DeadlineQueue.ClockKind.allCases { setTimer(kind) }
    }

    /// Sets `kind`'s Dispatch timer for the queue's wake on that clock (or for never), unless it is set
    /// for that already. Monotonic wakes are Dispatch deadlines as they are; a wall wake is set as a delay
    /// from the wall clock's now, so it is set again when the clock is set (`wallClockChanged`).
    ///
    /// The timers are `.strict`: a window of zero (a job with no leeway is due) stays zero, and a wider
    /// window is given as the leeway.
    func setTimer(_ kind: DeadlineQueue.ClockKind, force: Bool = false) {
        guard !timers.delivering else { return }
        let wake = timers.queue.wake(kind)
        guard force || wake != timers.setFor[kind.rawValue] else { return }
        timers.setFor[kind.rawValue] = wake
        guard let wake else {
            switch kind {
            case .mono: timers.sources[kind.rawValue]?.schedule(deadline: .distantFuture, repeating: .never)
            case .wall: timers.sources[kind.rawValue]?.schedule(wallDeadline: .distantFuture, repeating: .never)
            }
            return
        }
        let source = timerSource(kind)
        let leeway = DispatchTimeInterval.nanoseconds(Int(wake.leeway))
        switch kind {
        case .mono:
            source.schedule(deadline: DispatchTime(uptimeNanoseconds: UInt64(max(1, wake.earliest))), repeating: .never, leeway: leeway)
        case .wall:
            let delay = max(.zero, WallTime(nanosecondsSinceEpoch: wake.earliest) - clock.wallNow)
            source.schedule(wallDeadline: .now() + .nanoseconds(Int(delay.nanoseconds)), repeating: .never, leeway: leeway)
        }
    }

    private func timerSource(_ kind: DeadlineQueue.ClockKind) -> any DispatchSourceTimer {
        if let source = timers.sources[kind.rawValue] { return source }
        let source = DispatchSource.makeTimerSource(flags: .strict, queue: queue)
        source.setEventHandler { [unowned self] in
            self.assumeIsolated { $0.timerFired(kind) }
        }
        source.activate()
        timers.sources[kind.rawValue] = source
        return source
    }

    /// Delivers what is due on either clock by now, as the timers would when they go off. For the start
    /// of a long turn of other work (a burst of requests from many connections queues a turn per
    /// connection on the registry's queue, and a timer's handler waits behind all of them): a job due
    /// meanwhile then waits for one turn at most, not for the whole queue.
    func deliverDue() {
        guard !timers.delivering else { return }
        let now = clock.now()
        for kind in DeadlineQueue.ClockKind.allCases {
            let at = kind == .mono ? Int64(clamping: now.mono.nanosecondsSinceBoot) : now.wall.nanosecondsSinceEpoch
            if let wake = timers.queue.wake(kind), wake.earliest <= at { timerFired(kind) }
        }
    }

    /// `kind`'s timer went off: every job due on that clock by now gets `deadlineReached`, earliest first,
    /// then both timers are set for what is left (the deliveries armed the jobs' next deadlines). A job
    /// is never delivered before its deadline: a timer that went off early delivers nothing.
    private func timerFired(_ kind: DeadlineQueue.ClockKind) {
        timers.setFor[kind.rawValue] = nil
        let now = clock.now()
        let at = kind == .mono ? Int64(clamping: now.mono.nanosecondsSinceBoot) : now.wall.nanosecondsSinceEpoch
        timers.delivering = true
        for job in timers.queue.popDue(kind, at: at) {
            deliver(.deadlineReached(job.name, jobID: job.jobID))
        }
        timers.delivering = false
        for kind in DeadlineQueue.ClockKind.allCases { setTimer(kind) }
    }
}
