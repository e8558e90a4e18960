import CSystemd

/// Tells the service manager about readiness and status through `sd_notify` (libsystemd).
/// Outside systemd (no `NOTIFY_SOCKET`) every call is a silent no-op.
enum Notifier {
    static func ready(status: String) {
        send("READY=1\nSTATUS=\(status)")
    }

    static func status(_ status: String) {
        send("STATUS=\(status)")
    }

    static func stopping(status: String) {
        send("STOPPING=1\nSTATUS=\(status)")
    }

    private static func send(_ state: String) {
        _ = sd_notify(0, state)
    }
}
