import CTimerdSys
import Glibc

/// A signal number, so other modules need not import Glibc.
public struct Signal: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    public static let hup = Signal(rawValue: SIGHUP)
    public static let int = Signal(rawValue: SIGINT)
    public static let quit = Signal(rawValue: SIGQUIT)
    public static let abrt = Signal(rawValue: SIGABRT)
    public static let kill = Signal(rawValue: SIGKILL)
    public static let usr1 = Signal(rawValue: SIGUSR1)
    public static let usr2 = Signal(rawValue: SIGUSR2)
    public static let pipe = Signal(rawValue: SIGPIPE)
    public static let alrm = Signal(rawValue: SIGALRM)
    public static let term = Signal(rawValue: SIGTERM)
    public static let chld = Signal(rawValue: SIGCHLD)
    public static let cont = Signal(rawValue: SIGCONT)
    public static let stop = Signal(rawValue: SIGSTOP)

    /// "SIGTERM", or "signal 99" for an unknown number.
    ///
    /// The corresponding C function is `sigabbrev_np`.
    public var description: String {
        tsys_signal_abbrev(rawValue).map { "SIG" + String(cString: $0) } ?? "signal \(rawValue)"
    }
}

/// Process-wide signal dispositions and the calling thread's signal mask.
public enum Signals {
    /// Ignores `signal` process-wide, e.g. `.pipe` so writes to a closed socket fail with EPIPE.
    /// Children started by `Spawn` get default dispositions back.
    ///
    /// The corresponding C function is `sigaction` (`SIG_IGN`).
    public static func ignore(_ signal: Signal) throws(Errno) {
        _ = try checkResult(tsys_ignore_signal(signal.rawValue))
    }

    /// Restores the default disposition of `signal`.
    ///
    /// The corresponding C function is `sigaction` (`SIG_DFL`).
    public static func restoreDefault(_ signal: Signal) throws(Errno) {
        _ = try checkResult(tsys_default_signal(signal.rawValue))
    }

    /// Blocks exactly `signals` in the calling thread, for `waitForAny`. Call it on the main thread before any other
    /// thread exists, so every thread inherits the block and the signals stay pending until waited for.
    ///
    /// The corresponding C function is `pthread_sigmask`.
    ///
    /// The mask becomes exactly `signals`: whatever else the parent had blocked (a process started from a
    /// thread that blocks everything inherits that mask) is unblocked, so other signals act normally.
    public static func block(_ signals: [Signal]) throws(Errno) {
        let numbers = signals.map(\.rawValue)
        _ = try checkResult(numbers.withUnsafeBufferPointer { tsys_thread_set_mask($0.baseAddress, Int32($0.count)) })
    }

    /// Waits until one of `signals` (blocked in every thread with `block`) is pending, takes it, and
    /// returns it. A signal sent while nobody waits stays pending, so none is lost.
    ///
    /// The corresponding C function is `sigwait`.
    public static func waitForAny(_ signals: [Signal]) throws(Errno) -> Signal {
        let numbers = signals.map(\.rawValue)
        let result = numbers.withUnsafeBufferPointer { tsys_sigwait($0.baseAddress, Int32($0.count)) }
        return Signal(rawValue: try checkResult(result))
    }

    /// Blocks (or unblocks) `signal` in the calling thread only.
    ///
    /// The corresponding C function is `pthread_sigmask`.
    public static func setBlockedInCurrentThread(_ signal: Signal, _ blocked: Bool) throws(Errno) {
        _ = try checkResult(tsys_thread_mask_signal(signal.rawValue, blocked ? 1 : 0))
    }

    /// Blocks every signal in the calling thread, as Dispatch worker threads do (for tests).
    ///
    /// The corresponding C function is `pthread_sigmask`.
    public static func blockAllInCurrentThread() throws(Errno) {
        _ = try checkResult(tsys_thread_block_all_signals())
    }
}
