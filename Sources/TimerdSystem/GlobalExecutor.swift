import CTimerdSys
import Dispatch

/// Swift concurrency's global concurrent executor, moved onto one serial queue of timerd's own.
///
/// On Linux the default global executor is libdispatch's global concurrent queue, and the first job a
/// worker of that queue runs starts libdispatch's worker-pool monitor: a timer that wakes the process
/// every second for the rest of its life (`_dispatch_workq_init_once`, swift-corelibs-libdispatch
/// `src/event/workqueue.c`). timerd's components are actors on serial queues of their own and run no work
/// on the global executor, but a task awaiting a continuation (the store's commit, the `LIST` queue) is
/// resumed there first and only then hops back to its actor. Those hops, and anything else that lands on
/// the global executor, run here instead: a serial queue's thread is an overcommit worker, which the
/// monitor does not watch, so an idle daemon stays asleep (docs/performance.md, "Idle wake-ups").
public enum GlobalExecutor {
    /// Call once, first thing in `main`, before any task starts. Serial: nothing in timerd may block on the
    /// global executor or need two of its jobs to run at once.
    public static func redirect() {
        tsys_redirect_global_executor { job in
            nonisolated(unsafe) let job = job
            GlobalExecutor.queue.async { tsys_run_global_job(job) }
        }
    }

    static let queue = DispatchQueue(label: "timerd.global-executor")
}
