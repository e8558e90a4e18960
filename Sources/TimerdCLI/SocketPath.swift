/// Where timerctl looks for timerd's control socket: the same defaults as the daemon's.
package enum SocketPath {
    /// The system daemon's socket (root's default).
    package static let system = "/run/timerd/timerd.sock"

    /// `--socket` > `$TIMERD_SOCKET` > `/run/timerd/timerd.sock` for root; for other users their own daemon's
    /// socket (`$XDG_RUNTIME_DIR/timerd/timerd.sock`, else `/tmp/timerd-UID/timerd.sock`) when it exists, else
    /// the system daemon's when that exists (members of its socket group use it, `docs/security.md`), else
    /// their own (so the error names it). Empty variables count as unset.
    package static func resolve(
        flag: String?, environment: [String: String], userID: UInt32, socketExists: (String) -> Bool
    ) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let path = environment["TIMERD_SOCKET"], !path.isEmpty { return path }
        if userID == 0 { return system }
        let own: String
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            own = runtime + "/timerd/timerd.sock"
        } else {
            own = "/tmp/timerd-\(userID)/timerd.sock"
        }
        return !socketExists(own) && socketExists(system) ? system : own
    }
}
