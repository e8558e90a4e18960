import Dispatch

/// Runs an actor's jobs on a serial `DispatchQueue`, so Dispatch sources that fire on that queue can enter
/// the actor synchronously (`assumeIsolated`) with no hop. (`DispatchSerialQueue` does not exist on Linux.)
final class QueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
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
