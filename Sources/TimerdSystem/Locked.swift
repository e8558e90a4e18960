import CTimerdSys
import Synchronization

/// A `Mutex` (Synchronization) whose hand-overs ThreadSanitizer can see. Use it wherever `Mutex` would do.
///
/// On Linux a contended `Mutex` is passed from one thread to the next by the kernel (`FUTEX_LOCK_PI` /
/// `FUTEX_UNLOCK_PI`), not by an atomic operation in the program, so ThreadSanitizer sees no
/// happens-before between two critical sections and reports the state they protect as a data race
/// (a five-line program with four threads incrementing a `Mutex<Int>` shows it). `withLock` therefore
/// tells it "acquired" on entry and "released" on exit; outside `--sanitize=thread` builds the two
/// calls do nothing.
public struct Locked<Value: ~Copyable>: ~Copyable, Sendable {
    private let mutex: Mutex<Value>

    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// `Mutex.withLock`: `body` runs with the lock held.
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // The mutex's address names the lock for ThreadSanitizer (never dereferenced). Not the value's:
        // taking that is itself an access to it, before the lock is known to be held.
        let lock = withUnsafePointer(to: mutex) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            tsys_tsan_acquire(lock)
            defer { tsys_tsan_release(lock) }
            return try body(&value)
        }
    }
}
