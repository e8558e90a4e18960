import Glibc
import CTimerdSystemd
import TimerdCore
import TimerdSystem

/// Tells the service manager about readiness, status, reloads, stops and liveness through `sd_notify`
/// (libsystemd). Outside systemd (no `NOTIFY_SOCKET`) every call is a silent no-op.
enum Notifier {
    /// Whether anyone listens (so callers can skip building status text).
    static let enabled = CurrentProcess.environmentVariable("NOTIFY_SOCKET") != nil

    static func ready(status: String) {
        send("READY=1\nSTATUS=\(status)")
    }

    static func status(_ status: String) {
        send("STATUS=\(status)")
    }

    /// Before a reload: `RELOADING=1` with the monotonic time systemd uses to order it; `ready` follows.
    static func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(SystemClock.monotonicNow() / 1_000)\nSTATUS=reloading the config")
    }

    static func stopping(status: String) {
        send("STOPPING=1\nSTATUS=\(status)")
    }

    /// Asks for `extra` more time than the unit's stop timeout while running jobs finish.
    static func extendTimeout(by extra: Duration) {
        send("EXTEND_TIMEOUT_USEC=\(max(0, extra.nanoseconds / 1_000))")
    }

    static func watchdog() {
        send("WATCHDOG=1")
    }

    /// The watchdog interval systemd expects pings within (`WatchdogSec=`), or nil when it is off.
    static func watchdogInterval() -> Duration? {
        var microseconds: UInt64 = 0
        guard tsd_watchdog_enabled(&microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds))
    }

    private static func send(_ state: String) {
        guard enabled else { return }
        if tsd_notify(state) == -ENOSYS { _ = libsystemdMissing }
    }

    /// Said once on stderr (the journal, under systemd): without libsystemd nothing reaches systemd, and
    /// a `Type=notify` unit would wait for readiness until its start times out.
    private static let libsystemdMissing: Void = {
        try? FileDescriptor.standardError.writeAll(
            "timerd: NOTIFY_SOCKET is set but libsystemd.so.0 cannot be loaded: readiness, status and the watchdog are not reported to systemd (install libsystemd0)\n")
    }()
}

/// The listening socket systemd passed (socket activation), if any.
enum SocketActivation {
    enum Failure: Error, CustomStringConvertible {
        case notAUnixStreamListener(Int32)
        case tooMany(Int32)

        var description: String {
            switch self {
            case .notAUnixStreamListener(let fd):
                return "the descriptor systemd passed (fd \(fd)) is not a listening Unix stream socket; check ListenStream= in timerd.socket"
            case .tooMany(let count):
                return "systemd passed \(count) descriptors; timerd.socket must have exactly one ListenStream="
            }
        }
    }

    /// The passed socket, made close-on-exec and non-blocking; nil when not socket-activated.
    /// `LISTEN_FDS` and friends are removed from the environment so jobs do not see them.
    static func listener() throws -> FileDescriptor? {
        let count = tsd_listen_fds()
        guard count > 0 else { return nil }
        guard count == 1 else { throw Failure.tooMany(count) }
        let fd = FileDescriptor(rawValue: TSD_LISTEN_FDS_START)
        guard tsd_is_socket_unix(fd.rawValue, UnixSocket.streamType, 1) > 0 else {
            throw Failure.notAUnixStreamListener(fd.rawValue)
        }
        try fd.setCloseOnExec()
        try fd.setNonBlocking()
        return fd
    }
}
