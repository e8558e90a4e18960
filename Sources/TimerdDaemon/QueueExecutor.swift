import Dispatch
import TimerdSystem

/// Runs an actor's jobs on a serial `DispatchQueue`, so Dispatch sources that fire on that queue can enter
/// the actor synchronously (`assumeIsolated`) with no hop. (`DispatchSerialQueue` does not exist on Linux.)
final class QueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    /// What the registry's and the runs' queues target: one serial lane, so a hand-over between them
    /// (a fire's run to the launcher, a run's events back) is the next block on the thread already
    /// draining it, not a wake-up of another thread; at 1,000 fires/s that was most of the daemon's
    /// thread wake-ups (`docs/performance.md`, "Fire to command (round 5)"). Neither blocks. In the daemon
    /// the lane targets the main queue, which the main thread runs between `IOWatcher`'s events, so the
    /// events of a fire and its run are handled by the thread that took them ("Fire to command (round
    /// 11)"); elsewhere (tests) a Dispatch worker runs it.
    static let core = DispatchQueue(
        label: "timerd.core", target: IOWatcher.onMainThread.load(ordering: .acquiring) ? .main : nil)

    /// `target`: the queue whose lane it shares (nil: a lane of its own).
    init(label: String, target: DispatchQueue? = nil) {
        queue = DispatchQueue(label: label, target: target)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
