import Dispatch
import TimerdSystem

/// Gives back memory when timerd turns idle: when the last control connection has closed (the malloc
/// arenas of the Dispatch workers that served its requests keep their freed memory otherwise). Runs on a
/// serial queue of its own, never the registry's; a release asked for while one is waiting to run is the
/// same release. Only at events that already happen: no timer, no wake-up of an idle daemon
/// (docs/performance.md, "Idle resident memory").
final class IdleMemory: Sendable {
    private let queue = DispatchQueue(label: "timerd.memory")
    private let waiting = Locked(false)

    func release() {
        let first = waiting.withLock { waiting in
            defer { waiting = true }
            return !waiting
        }
        guard first else { return }
        queue.async { [self] in
            waiting.withLock { $0 = false }
            ResidentMemory.trimMalloc()
        }
    }
}
