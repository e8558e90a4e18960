import CTimerdSys
import Glibc

/// A system error number, thrown by every wrapper in this module.
///
/// Equality compares the number only. The description is the English text and symbolic name,
/// e.g. "No such file or directory (ENOENT)", independent of the locale.
public struct Errno: Error, Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    /// The raw `errno` value.
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The calling thread's current `errno`.
    static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// "No such file or directory (ENOENT)".
    ///
    /// The corresponding C functions are `strerrordesc_np` and `strerrorname_np`.
    public var description: String {
        let text = tsys_errno_description(rawValue).map { String(cString: $0) }
        let name = tsys_errno_name(rawValue).map { String(cString: $0) }
        switch (text, name) {
        case let (text?, name?): return "\(text) (\(name))"
        case let (text?, nil): return text
        default: return "Unknown error \(rawValue)"
        }
    }

    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let isDirectory = Errno(rawValue: EISDIR)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let noChildProcess = Errno(rawValue: ECHILD)
    public static let noMemory = Errno(rawValue: ENOMEM)
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    public static let noSuchProcess = Errno(rawValue: ESRCH)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let notConnected = Errno(rawValue: ENOTCONN)
    public static let notSocket = Errno(rawValue: ENOTSOCK)
    /// ENOTSUP, which is EOPNOTSUPP on Linux.
    public static let notSupported = Errno(rawValue: ENOTSUP)
    public static let operationNotPermitted = Errno(rawValue: EPERM)
    /// EAGAIN, which is EWOULDBLOCK on Linux.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
}

/// Runs `call` until it returns something other than -1 with EINTR; the one place this module
/// retries interrupted system calls. Throws the call's `errno` on any other failure.
@inline(__always)
func retryOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) throws(Errno) -> Result {
    while true {
        let result = call()
        if result != -1 {
            return result
        }
        let error = Errno.current
        if error != .interrupted {
            throw error
        }
    }
}

/// Throws the current `errno` if `result` is -1 (for calls that must not be retried on EINTR).
@inline(__always)
func checkResult<Result: BinaryInteger>(_ result: Result) throws(Errno) -> Result {
    if result == -1 {
        throw Errno.current
    }
    return result
}
