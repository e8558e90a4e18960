/// Where timerctl looks for timerd's control socket: the same defaults as the daemon's.
package enum SocketPath {
    /// The system daemon's socket (root's default).
    package static let system = "/run/timerd/timerd.sock"

    /// `--socket` > `$TIMERD_SOCKET` > `/run/timerd/timerd.sock` for root > `$XDG_RUNTIME_DIR/timerd/timerd.sock`
    /// > `/tmp/timerd-UID/timerd.sock`. Empty variables count as unset.
    package static func resolve(flag: String?, environment: [String: String], userID: UInt32) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let path = environment["TIMERD_SOCKET"], !path.isEmpty { return path }
        if userID == 0 { return system }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/timerd/timerd.sock" }
        return "/tmp/timerd-\(userID)/timerd.sock"
    }
}
